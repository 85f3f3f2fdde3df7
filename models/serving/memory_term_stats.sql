{#- One row per (user_id, term): document frequency of the term among the user's current
    memories, with the user's memory count and average memory length, for BM25 (recall is per
    user, so statistics are per user). Incremental (delete+insert on user_id): only users with a
    memory int_memories_consolidated wrote since the last run, or (retention on) with a memory
    retention takes out of recall, are recomputed, from their rows of memory_term_index; computed_at
    is the run that computed the row. -#}
{{ config(
    materialized='incremental', incremental_strategy='delete+insert', unique_key='user_id',
    indexes=lookup_indexes([['user_id', 'term'], ['computed_at']]),
) }}
-- depends_on: {{ ref('int_memories_consolidated') }}
-- depends_on: {{ ref('int_memory_retention') }}

with index_rows as (
    select *
    from {{ ref('memory_term_index') }}
    {% if is_incremental() %}
        where user_id in (
            select c.user_id
            from {{ ref('int_memories_consolidated') }} as c
            where c.consolidated_at > (select coalesce(max(t.computed_at), '-infinity'::timestamp) from {{ this }} as t)
            union
            select c.user_id
            from {{ ref('int_memories_consolidated') }} as c
            inner join {{ ref('int_memory_retention') }} as r using (memory_id)
            where r.retention_action != 'keep'
        )
    {% endif %}
)

select *
{%- set computed_at = "'" ~ run_started_at.strftime("%Y-%m-%d %H:%M:%S.%f") ~ "'::timestamp" %}
from ({{ memory_term_stats_rows('index_rows', computed_at) }}) as stats
order by user_id, term
