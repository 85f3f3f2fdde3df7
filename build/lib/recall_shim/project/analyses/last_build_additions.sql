-- What the last build added.
-- One row per memory whose earliest source message was loaded by the most recent build that
-- loaded messages (session_log.loaded_at is that build's start time), with the messages it
-- came from. Messages that build rejected are in session_log_rejects with the same landing_file.
with last_load as (
    select max(loaded_at) as loaded_at
    from {{ ref('session_log') }}
),

loads as (
    select
        m.message_id,
        l.loaded_at
    from {{ ref('session_messages') }} as m
    inner join {{ ref('session_log') }} as l using (landing_id)
),

first_loads as (
    select
        t.memory_id,
        min(loads.loaded_at) as first_loaded_at
    from {{ ref('long_term_memory') }} as t,
        unnest(t.source_message_ids) as s (message_id)
    inner join loads using (message_id)
    group by t.memory_id
)

select
    t.memory_id,
    t.user_id,
    t.kind,
    t.content,
    t.source_message_ids,
    t.valid_to is not null as is_superseded,
    f.first_loaded_at
from {{ ref('long_term_memory') }} as t
inner join first_loads as f using (memory_id)
where f.first_loaded_at = (select loaded_at from last_load)
order by t.user_id, t.kind, t.content
