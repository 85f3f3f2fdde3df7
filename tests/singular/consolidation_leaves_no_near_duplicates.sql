{#- Consolidation invariant: no two non-episode memories of one user and kind that consolidation
    may merge (same_thing: slot values are never merged) are as close as var
    consolidation_min_sim (a later one would have joined the earlier). Returns the offending
    pairs. Checked for the memories the latest build wrote (consolidated_at) against all of their
    user's memories: a pair of memories no build rewrote was checked when one of them was written
    (O(new x user's memories) per build, like the incremental consolidation itself). -#}
with latest as (
    select m.memory_id, m.user_id, m.kind, m.slot, m.embedding
    from {{ ref('int_memories_consolidated') }} as m
    where m.kind != 'episode'
        and m.consolidated_at = (select max(w.consolidated_at) from {{ ref('int_memories_consolidated') }} as w)
)

-- the other side is the table itself, not a CTE: PostgreSQL then plans the join from the table's
-- statistics and its user_id index (a CTE referenced twice is materialised without statistics,
-- and its row estimate of 1 made a nested loop over every pair of the store)
select
    a.user_id,
    a.kind,
    a.memory_id as memory_a,
    b.memory_id as memory_b,
    {{ vector_cosine('a.embedding', 'b.embedding') }} as similarity
from latest as a
inner join {{ ref('int_memories_consolidated') }} as b
    on a.user_id = b.user_id
        and a.kind = b.kind
        and a.memory_id != b.memory_id
        and {{ same_thing('a', 'b') }}
where b.kind != 'episode'
    and {{ vector_cosine('a.embedding', 'b.embedding') }} >= {{ number_var('consolidation_min_sim') }}
