{#- Accepted messages of the given roles with the time their landing row was loaded; in an
    incremental run only those loaded since the model's last run. Shared by the extraction
    models (rules and episodes) so that both see exactly the same new messages.
    messages: ref('int_messages_validated') (accepted rows: reject_reason is null), passed by the
    model; roles: list of role names (a var). Columns: message_id, user_id, content, message_at,
    loaded_at. -#}
{% macro new_messages_to_extract(messages, roles) -%}
    select
        m.message_id,
        m.user_id,
        m.content,
        m.message_at,
        m.loaded_at
    from {{ messages }} as m
    where m.reject_reason is null
        and m.role in ({{ sql_string_list(roles) }})
    {% if is_incremental() %}
        and m.loaded_at > (select coalesce(max(loaded_at), '-infinity'::timestamp) from {{ this }})
    {% endif %}
{%- endmacro %}
