{#- The typed columns of landed session-log rows (all text as landed, session_log's columns):
    ids trimmed, role lower-cased, timestamps in UTC, the message_id resolved (legacy_expr: SQL
    boolean, true where the store keeps legacy derived ids; macros/identity.sql). Shared by
    int_messages_validated and the hot tail's statement (macros/tail.sql), so a message is typed
    the same way before and after a build. -#}
{% macro typed_landed_columns(legacy_expr) -%}
        landing_id,
        user_id,
        nullif(trim(session_id), '') as session_id,
        nullif(trim(agent_id), '') as agent_id,
        {{ try_cast_text('msg_seq', 'bigint') }} as msg_seq,
        lower(trim(role)) as role,
        content,
        is_invalid_utf8,
        {{ try_cast_text('ts', 'timestamptz') }} at time zone 'UTC' as message_at,
        {{ resolved_message_id('', legacy_expr) }} as message_id,
        {{ try_cast_text('landed_at', 'timestamptz') }} at time zone 'UTC' as landed_at,
        ts as ts_raw,
        msg_seq as msg_seq_raw,
        door_reason,
        landing_seq,
        landing_file,
        loaded_at
{%- endmacro %}

{#- The first reason a typed landed row (typed_landed_columns) is rejected, NULL when it is
    accepted (duplicate message ids aside: they need the other rows). Shared by
    int_messages_validated and the hot tail's statement. -#}
{% macro landed_row_reject_reason() -%}
        case
            when door_reason is not null then door_reason
            when user_id is null or {{ regexp_full_match('user_id', "'[\\s\\pZ]*'") }} then 'null_user'
            when {{ regexp_search('user_id', "'^[\\s\\pZ]|[\\s\\pZ]$|[\\x00-\\x1f\\x7f-\\x9f]'") }}
                or length(user_id) > {{ number_var('max_user_id_chars') }} then 'invalid_user_id'
            when session_id is null then 'null_session'
            when is_invalid_utf8 then 'invalid_utf8'
            when content is null or {{ regexp_full_match('content', "'[\\s\\pZ]*'") }} then 'empty_content'
            when length(content) > {{ number_var('max_content_chars') }} then 'content_too_long'
            when {{ regexp_search('content', "'[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]'") }} then 'control_characters'
            when role is null
                or role not in ({{ sql_string_list(string_list_var('accepted_roles')) }}) then 'unknown_role'
            when msg_seq is null then 'invalid_msg_seq'
            when message_at is null or not isfinite(message_at)
                or message_at < '0001-01-01'::timestamp then 'invalid_timestamp'
            when message_at > coalesce(landed_at, message_at)
                + {{ minutes_interval(number_var('max_future_skew_minutes')) }} then 'future_timestamp'
        end
{%- endmacro %}
