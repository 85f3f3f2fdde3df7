{#- Consolidation invariant: no two current, non-episode memories of one user and kind are as
    close as var consolidation_min_sim (a later one would have joined the earlier). Returns the
    offending pairs. -#}
select
    a.user_id,
    a.kind,
    a.memory_id as memory_a,
    b.memory_id as memory_b,
    {{ vector_cosine('a.embedding', 'b.embedding') }} as similarity
from {{ ref('long_term_memory') }} as a
inner join {{ ref('long_term_memory') }} as b
    on a.user_id = b.user_id
        and a.kind = b.kind
        and a.memory_id < b.memory_id
where a.kind != 'episode'
    and {{ vector_cosine('a.embedding', 'b.embedding') }} >= {{ var('consolidation_min_sim') }}
