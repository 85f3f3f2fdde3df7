{#- One row per (memory_id, term): the lexical index over current memories, for BM25 recall.
    Terms come from the tokenize macro (words; Han character bigrams).
    Incremental (delete+insert on memory_id): a build tokenizes only the memories
    int_memories_consolidated wrote since the last run (consolidated_at) and current memories
    missing here; the post-hook deletes the rows of memories that are no longer current (superseded,
    archived or dropped by retention, gone). -#}
{{ config(
    materialized=incremental_materialization(),
    incremental_strategy='delete+insert',
    unique_key='memory_id',
    post_hook=[
      "delete from {{ this }} where memory_id not in (
          select c.memory_id from {{ ref('int_memories_consolidated') }} as c
          where c.valid_to is null
              and c.memory_id not in (
                  select r.memory_id from {{ ref('int_memory_retention') }} as r where r.retention_action != 'keep'))",
    ],
) }}

with memories as (
    select memory_id, user_id, content, consolidated_at
    from {{ ref('int_memories_consolidated') }}
    where valid_to is null
        and memory_id not in (  -- archived or dropped by the retention policy: out of recall
            select memory_id from {{ ref('int_memory_retention') }} where retention_action != 'keep'
        )
    {% if is_incremental() %}
        and (
            consolidated_at > (select coalesce(max(t.consolidated_at), '-infinity'::timestamp) from {{ this }} as t)
            or memory_id not in (select t.memory_id from {{ this }} as t)
        )
    {% endif %}
)

select *
from ({{ memory_term_rows('memories') }}) as term_rows
order by user_id, term
