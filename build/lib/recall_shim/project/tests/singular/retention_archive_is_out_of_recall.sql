{#- An archived or dropped memory is never in long_term_memory (what recall serves), and every
    archived memory is in memory_archive. Returns the offending memories. -#}
select 'in_recall' as problem, r.memory_id
from {{ ref('int_memory_retention') }} as r
inner join {{ ref('long_term_memory') }} using (memory_id)
where r.retention_action != 'keep'

union all

select
    'not_archived' as problem,
    r.memory_id
from {{ ref('int_memory_retention') }} as r
left join {{ ref('memory_archive') }} as a using (memory_id)
where r.retention_action = 'archive' and a.memory_id is null
