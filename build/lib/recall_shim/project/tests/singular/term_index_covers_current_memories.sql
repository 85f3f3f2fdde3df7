{#- Every current memory whose content has at least one term is in the term index, and no
    superseded memory is. Returns the memories that break this. Checked for the memories the
    latest build wrote (consolidated_at; a full build writes them all): a memory's terms and its
    valid_to change only when a build rewrites it, so older rows were checked when written. -#}
with current_memories as (
    select memory_id, {{ list_length(tokenize('content')) }} as n_terms, valid_to
    from {{ ref('long_term_memory') }}
    where consolidated_at = (select max(l.consolidated_at) from {{ ref('long_term_memory') }} as l)
),

indexed as (
    select distinct t.memory_id
    from {{ ref('memory_term_index') }} as t
    where t.memory_id in (select c.memory_id from current_memories as c)
)

select m.memory_id, m.n_terms, m.valid_to, i.memory_id is not null as is_indexed
from current_memories as m
left join indexed as i using (memory_id)
where (m.valid_to is null and m.n_terms > 0 and i.memory_id is null)
    or (m.valid_to is not null and i.memory_id is not null)
