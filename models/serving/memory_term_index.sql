{#- One row per (memory_id, term): the lexical index over current memories, for BM25 recall.
    Terms come from the tokenize macro (words; Han character bigrams).
    Incremental (delete+insert on memory_id): a build tokenizes only the memories
    int_memories_consolidated wrote since the last run (consolidated_at) and current memories
    missing here; the post-hook deletes the rows of memories that are no longer current (superseded,
    archived or dropped by retention, gone). -#}
{{ config(
    materialized='incremental',
    incremental_strategy='delete+insert',
    unique_key='memory_id',
    indexes=lookup_indexes([['memory_id'], ['consolidated_at'], ['user_id', 'term']]),
    post_hook=[
      "delete from {{ this }} as t where not exists (
          select 1 from {{ ref('int_memories_consolidated') }} as c
          where c.memory_id = t.memory_id
              and c.valid_to is null
              and c.memory_id not in (
                  select r.memory_id from {{ ref('int_memory_retention') }} as r where r.retention_action != 'keep'))",
    ],
) }}

with memories as (
    select c.memory_id, c.user_id, c.content, c.consolidated_at
    from {{ ref('int_memories_consolidated') }} as c
    where c.valid_to is null
        and c.memory_id not in (  -- archived or dropped by the retention policy: out of recall
            select r.memory_id from {{ ref('int_memory_retention') }} as r where r.retention_action != 'keep'
        )
    {% if is_incremental() %}
        and (
            c.consolidated_at > (select coalesce(max(t.consolidated_at), '-infinity'::timestamp) from {{ this }} as t)
            or not exists (select 1 from {{ this }} as t where t.memory_id = c.memory_id)
        )
    {% endif %}
)

select *
from ({{ memory_term_rows('memories') }}) as term_rows
order by user_id, term
