{#- One row per memory (current and superseded): what an agent can recall about a user. Memories
    the retention policy archived or dropped (int_memory_retention) are not here. -#}
with memories as (
    select * from {{ ref('int_memories_consolidated') }}
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
    m.embedding,
    m.created_at,
    s.last_accessed,
    s.access_count,
    s.strength,
    m.mention_count,
    m.source_message_ids,
    m.valid_from,
    m.valid_to,
    s.strength_as_of,
    m.embedding_form,
    m.kind = 'episode' and {{ regexp_search('m.content', "'[?？]\\s*$'") }} as is_question,
    '{{ var("embedding_model") }}' as embedding_model,
    p.session_ids,
    p.agent_ids
from memories as m
inner join strengths as s using (memory_id)
inner join {{ ref('int_memory_retention') }} as r using (memory_id)
left join {{ ref('int_memory_provenance') }} as p using (memory_id)
where r.retention_action = 'keep'
