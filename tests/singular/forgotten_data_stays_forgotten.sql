{#- Forget tombstones hold: no loaded row of a forgotten user that landed at or before the
    forget, and no memory forgotten by id, in the session log, the messages, the rejects,
    recall or the archive. Returns the offending rows. -#}
with forgotten_users as (
    select user_id, forgotten_at from {{ ref('stg_forget_requests') }} where scope = 'user'
),

forgotten_memories as (
    select memory_id from {{ ref('stg_forget_requests') }} where scope = 'memory'
)

select 'session_log' as relation, l.landing_id as row_id
from {{ ref('session_log') }} as l
inner join forgotten_users as f
    on (f.user_id = l.user_id or f.user_id = trim(l.user_id))
        and {{ try_cast_text('l.landed_at', 'timestamp') }} <= f.forgotten_at

union all

select
    'long_term_memory' as relation,
    memory_id as row_id
from {{ ref('long_term_memory') }}
where memory_id in (select memory_id from forgotten_memories)

union all

select
    'memory_archive' as relation,
    memory_id as row_id
from {{ ref('memory_archive') }}
where memory_id in (select memory_id from forgotten_memories)

union all

select
    'stg_recall_events' as relation,
    event_id as row_id
from {{ ref('stg_recall_events') }}
where memory_id in (select memory_id from forgotten_memories)
