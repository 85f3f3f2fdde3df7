{#- One row per accepted message of the session log. Incremental (append) on loaded_at. -#}
{{ config(materialized='incremental', incremental_strategy='append', indexes=lookup_indexes([['loaded_at']])) }}

select
    message_id,
    user_id,
    session_id,
    agent_id,
    msg_seq,
    role,
    content,
    message_at,
    landed_at,
    landing_id,
    loaded_at
from {{ ref('int_messages_validated') }}
where reject_reason is null
{% if is_incremental() %}
    and loaded_at > (select coalesce(max(loaded_at), '-infinity'::timestamp) from {{ this }})
{% endif %}
