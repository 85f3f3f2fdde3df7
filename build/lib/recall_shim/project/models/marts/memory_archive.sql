{#- One row per archived memory: memories the retention policy (int_memory_retention, var
    retention_action 'archive') took out of recall, with content and provenance for analysts.
    ALL USERS: filter by user_id, or use user_archived_memories(uid). -#}
with memories as (
    select * from {{ ref('int_memories_consolidated') }}
),

retention as (
    select * from {{ ref('int_memory_retention') }}
    where retention_action = 'archive'
),

strengths as (
    select * from {{ ref('int_memory_strength') }}
)

select
    m.memory_id,
    m.user_id,
    m.kind,
    m.slot,
    m.content,
    m.created_at,
    r.last_active_at,
    s.strength,
    s.access_count,
    m.source_message_ids,
    m.valid_from,
    m.valid_to,
    s.strength_as_of as archived_as_of
from memories as m
inner join retention as r using (memory_id)
inner join strengths as s using (memory_id)
