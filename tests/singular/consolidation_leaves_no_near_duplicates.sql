{#- Consolidation invariant: no two non-episode memories of one user and kind that consolidation
    may merge (same_thing: slot values are never merged) are as close as var
    consolidation_min_sim (a later one would have joined the earlier). Returns the offending
    pairs. Checked for the memories the latest build wrote (consolidated_at) against all of their
    user's memories: a pair of memories no build rewrote was checked when one of them was written
    (O(new x user's memories) per build, like the incremental consolidation itself). -#}
with memories as (
    select memory_id, user_id, kind, slot, embedding, consolidated_at
    from {{ ref('int_memories_consolidated') }}
    where kind != 'episode'
),

latest as (
    select *
    from memories
    where consolidated_at = (select max(m.consolidated_at) from memories as m)
)

select
    a.user_id,
    a.kind,
    a.memory_id as memory_a,
    b.memory_id as memory_b,
    {{ vector_cosine('a.embedding', 'b.embedding') }} as similarity
from latest as a
inner join memories as b
    on a.user_id = b.user_id
        and a.kind = b.kind
        and a.memory_id != b.memory_id
        and {{ same_thing('a', 'b') }}
where {{ vector_cosine('a.embedding', 'b.embedding') }} >= {{ number_var('consolidation_min_sim') }}
