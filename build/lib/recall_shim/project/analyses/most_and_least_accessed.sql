-- Most and least accessed current memories.
-- One row per (list, rank): the top_n memories recalls returned most often, and the top_n
-- least accessed (never accessed first, then longest without an access). A memory can be in
-- both lists when a store has few memories.
{% set top_n = 20 %}
with current_memories as (
    select
        memory_id,
        user_id,
        kind,
        content,
        access_count,
        last_accessed,
        created_at,
        round(strength, 3) as strength
    from {{ ref('long_term_memory') }}
    where valid_to is null
),

ranked as (
    select
        *,
        row_number() over (order by access_count desc, strength desc, memory_id) as most_rank,
        row_number() over (
            order by access_count, coalesce(last_accessed, created_at), memory_id
        ) as least_rank
    from current_memories
)

select 'most_accessed' as list, most_rank as rank, * exclude (most_rank, least_rank)
from ranked
where most_rank <= {{ top_n }}
union all
select 'least_accessed' as list, least_rank as rank, * exclude (most_rank, least_rank)
from ranked
where least_rank <= {{ top_n }}
order by list desc, rank
