{#- One row per rejected landed row, with everything that landed and the reason. Nothing a writer
    sent is lost: a row is either in session_messages or here. Incremental (append) on loaded_at. -#}
{{ config(materialized='incremental', incremental_strategy='append', indexes=lookup_indexes([['loaded_at']])) }}

select
    landing_id,
    reject_reason,
    message_id,
    user_id,
    session_id,
    agent_id,
    msg_seq_raw,
    role,
    content,
    ts_raw,
    landed_at,
    landing_file,
    loaded_at
from {{ ref('int_messages_validated') }}
where reject_reason is not null
{% if is_incremental() %}
    and loaded_at > (select coalesce(max(loaded_at), '-infinity'::timestamp) from {{ this }})
{% endif %}
