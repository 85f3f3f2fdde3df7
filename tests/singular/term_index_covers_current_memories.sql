{#- Every current memory whose content has at least one term is in the term index, and no
    superseded memory is. Returns the memories that break this. -#}
with current_memories as (
    select memory_id, {{ list_length(tokenize('content')) }} as n_terms, valid_to
    from {{ ref('long_term_memory') }}
),

indexed as (
    select distinct memory_id from {{ ref('memory_term_index') }}
)

select m.memory_id, m.n_terms, m.valid_to, i.memory_id is not null as is_indexed
from current_memories as m
left join indexed as i using (memory_id)
where (m.valid_to is null and m.n_terms > 0 and i.memory_id is null)
    or (m.valid_to is not null and i.memory_id is not null)
