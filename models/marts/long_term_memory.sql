{#- One row per memory (current and superseded): what an agent can recall about a user. -#}
with memories as (
    select * from {{ ref('int_memories_consolidated') }}
),

embeddings as (
    select * from {{ ref('int_memory_embeddings') }}
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
    e.embedding,
    m.created_at,
    s.last_accessed,
    s.access_count,
    s.strength,
    m.mention_count,
    m.source_message_ids,
    m.valid_from,
    m.valid_to,
    s.strength_as_of,
    e.embedding_model
from memories as m
inner join embeddings as e
    on e.embedding_key = {{ embedding_key('m.content') }}
inner join strengths as s using (memory_id)
