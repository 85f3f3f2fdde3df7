{#- One row per memory (current and superseded): what an agent can recall about a user. Memories
    the retention policy archived or dropped (int_memory_retention) are not here.
    Incremental (merge on memory_id; docs/serving.md "Incremental builds"): the source holds one
    row per kept memory, with its content columns only where int_memories_consolidated wrote the
    memory since the last run (consolidated_at) or the memory is missing here; then one merge,
    without copying any unchanged embedding: written memories are inserted or replaced, every
    other row gets its strength columns from int_memory_strength (decay moves every strength every
    day), and rows no longer kept (gone, archived, dropped) are deleted. On PostgreSQL the same
    merge runs as plain statements (macro kept_memory_strategy, macros/incremental.sql), the
    btree indexes (memory_id, user_id, consolidated_at) are created with the table, the HNSW index
    by the post-hook (vector_index_hook, with the recall_index_hnsw_* vars), all maintained on
    insert and update, and fillfactor 50 leaves room for the strength update to stay a
    heap-only update that no index sees (docs/scaling_out.md, "Incremental builds"). -#}
{{ config(
    materialized='incremental',
    incremental_strategy=kept_memory_strategy(),
    unique_key='memory_id',
    on_schema_change='append_new_columns',
    indexes=lookup_indexes([['memory_id'], ['consolidated_at'], ['user_id']]),
    post_hook=["{{ vector_index_hook() }}"],
    fillfactor=50,
    merge_clauses={
        'when_matched': [
            {'condition': 'DBT_INTERNAL_SOURCE.consolidated_at is not null', 'action': 'update', 'mode': 'by_name'},
            {'action': 'update', 'mode': 'explicit',
             'update': {'include': ['strength', 'last_accessed', 'access_count', 'strength_as_of']}},
        ],
        'when_not_matched': [
            {'action': 'insert', 'mode': 'by_name'},
            {'by': 'source', 'action': 'delete'},
        ],
    },
) }}

with kept as (
    select memory_id
    from {{ ref('int_memory_retention') }}
    where retention_action = 'keep'
),

{% if is_incremental() %}
last_run as (
    select coalesce(max(t.consolidated_at), '-infinity'::timestamp) as consolidated_at from {{ this }} as t
),
{% endif %}

-- what int_memories_consolidated wrote since the last run (by its consolidated_at index), and
-- kept memories missing here; two conditions, not one OR, which made PostgreSQL read every
-- consolidated row with its embedding (12.6 of 14.4 s of this select at 1M memories)
written as (
    {% if is_incremental() -%}
        select c.* from {{ ref('int_memories_consolidated') }} as c
        where c.consolidated_at > (select lr.consolidated_at from last_run as lr)
        union all
        select c.* from {{ ref('int_memories_consolidated') }} as c
        where
            c.memory_id in (
                select k.memory_id from kept as k
                where not exists (select 1 from {{ this }} as t where t.memory_id = k.memory_id)
            )
            and c.consolidated_at <= (select lr.consolidated_at from last_run as lr)
    {%- else -%}
        select c.* from {{ ref('int_memories_consolidated') }} as c
    {%- endif %}
),

strengths as (
    select * from {{ ref('int_memory_strength') }}
)

select
    k.memory_id,
    m.user_id,
    m.kind,
    m.slot,
    m.content,
    m.embedding,
    m.created_at,
    m.happened_on,
    m.happened_grain,
    s.last_accessed,
    s.access_count,
    s.strength,
    m.mention_count,
    m.source_message_ids,
    m.valid_from,
    m.valid_to,
    s.strength_as_of,
    m.embedding_form,
    {{ is_question_memory('m.kind', 'm.content') }} as is_question,
    {{ sql_literal(string_var('embedding_model')) }} as embedding_model,
    p.session_ids,
    p.agent_ids,
    p.turn_session_id,
    p.turn_seq,
    m.consolidated_at
from kept as k
inner join strengths as s on s.memory_id = k.memory_id
{% if is_incremental() -%}
    -- a kept memory this run did not write: only its strength columns are merged
    left join written as m on m.memory_id = k.memory_id
{%- else -%}
    inner join written as m on m.memory_id = k.memory_id
{%- endif %}
left join {{ ref('int_memory_provenance') }} as p on p.memory_id = m.memory_id
