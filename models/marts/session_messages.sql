{#- One row per accepted message of the session log. -#}
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
    landing_id
from {{ ref('int_messages_validated') }}
where reject_reason is null
