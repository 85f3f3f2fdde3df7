{#- One row per memory (current and superseded): what an agent can recall about a user. Memories
    the retention policy archived or dropped (int_memory_retention) are not here.
    Incremental (delete+insert on memory_id; docs/serving.md "Incremental builds"): a build
    writes only the memories int_memories_consolidated wrote since the last run (consolidated_at)
    and kept memories missing here; then two linear passes without copying any embedding: a
    delete of the memories that are gone or no longer kept, and an update of every row's
    strength columns from int_memory_strength (decay moves every strength every day). -#}
{{ config(
    materialized=incremental_materialization(),
    incremental_strategy='delete+insert',
    unique_key='memory_id',
    post_hook=[
      "delete from {{ this }} where memory_id not in (
          select r.memory_id from {{ ref('int_memory_retention') }} as r where r.retention_action = 'keep')",
      "update {{ this }} as t
          set strength = s.strength, last_accessed = s.last_accessed, access_count = s.access_count,
              strength_as_of = s.strength_as_of
          from {{ ref('int_memory_strength') }} as s
          where s.memory_id = t.memory_id",
    ],
) }}

with memories as (
    select * from {{ ref('int_memories_consolidated') }}
    {% if is_incremental() %}
        where consolidated_at > (select coalesce(max(t.consolidated_at), '-infinity'::timestamp) from {{ this }} as t)
            or memory_id not in (select t.memory_id from {{ this }} as t)
    {% endif %}
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
    {{ sql_literal(string_var('embedding_model')) }} as embedding_model,
    p.session_ids,
    p.agent_ids,
    m.consolidated_at
from memories as m
inner join strengths as s using (memory_id)
inner join {{ ref('int_memory_retention') }} as r using (memory_id)
left join {{ ref('int_memory_provenance') }} as p using (memory_id)
where r.retention_action = 'keep'
