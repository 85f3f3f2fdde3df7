{#- Accepted messages of the given roles with the time their landing row was loaded; in an
    incremental run only those loaded since the model's last run. Shared by the extraction
    models (rules and episodes) so that both see exactly the same new messages.
    roles: list of role names (a var). Columns: message_id, user_id, content, message_at,
    loaded_at. -#}
{% macro new_messages_to_extract(roles) -%}
    select
        m.message_id,
        m.user_id,
        m.content,
        m.message_at,
        l.loaded_at
    from {{ ref('session_messages') }} as m
    inner join {{ ref('session_log') }} as l using (landing_id)
    where m.role in ({{ sql_string_list(roles) }})
    {% if is_incremental() %}
        and l.loaded_at > (select coalesce(max(loaded_at), '-infinity'::timestamp) from {{ this }})
    {% endif %}
{%- endmacro %}
