{#- One row per memory: strength as of the build's as_of time, folded from the memory's
    reinforcing events (repeat mentions and recall accesses) in time order. A pure function of
    (events, as_of): building twice, or daily, gives the same strength as building once.
    Access events recorded under a memory's legacy id (a store migrated to the current id scheme
    by --full-refresh, macros/identity.sql) still reinforce it: they are matched through the
    legacy id of the same user, kind and content. -#}
with memories as (
    select memory_id, user_id, kind, content, created_at, mentioned_at
    from {{ ref('int_memories_consolidated') }}
),

legacy_events as (
    select e.memory_id, e.user_id, e.accessed_at
    from {{ ref('stg_recall_events') }} as e
    where {{ is_legacy_memory_id('e.memory_id') }}
),

legacy_aliases as (
    select
        m.memory_id,
        m.user_id,
        {{ legacy_memory_id_key('m.user_id', 'm.kind', normalised_content('m.content')) }} as legacy_id
    from memories as m
    where not {{ is_legacy_memory_id('m.memory_id') }}
        and exists (select 1 from legacy_events)
),

as_of as (
    select {{ as_of_timestamp() }} as as_of_at
),

accesses as (
    select e.memory_id, e.accessed_at as event_at, true as is_access
    from {{ ref('stg_recall_events') }} as e
    inner join memories as m using (memory_id)
    where e.accessed_at >= m.created_at
    union all
    select a.memory_id, e.accessed_at as event_at, true as is_access
    from legacy_events as e
    inner join legacy_aliases as a on a.legacy_id = e.memory_id and a.user_id = e.user_id
    inner join memories as m on m.memory_id = a.memory_id
    where e.accessed_at >= m.created_at
),

repeat_mentions as (
    select memory_id, unnest(mentioned_at[2:]) as event_at, false as is_access
    from memories
),

events as (
    select *
    from (
        select * from accesses
        union all
        select * from repeat_mentions
    ) as all_events
    where event_at <= (select as_of_at from as_of)
),

gaps as (
    select
        e.memory_id,
        e.event_at,
        e.is_access,
        {{ days_between(
            'coalesce(lag(e.event_at) over (partition by e.memory_id order by e.event_at), m.created_at)',
            'e.event_at'
        ) }} as gap_days
    from events as e
    inner join memories as m using (memory_id)
),

folded as (
    select
        memory_id,
        {{ fold_strength(list_agg('gap_days', 'event_at')) }} as strength_at_last_event,
        max(event_at) as last_event_at,
        max(event_at) filter (where is_access) as last_accessed,
        count(*) filter (where is_access) as access_count
    from gaps
    group by memory_id
)

select
    m.memory_id,
    {{ decay_strength(
        'coalesce(f.strength_at_last_event, 1.0)',
        days_between('coalesce(f.last_event_at, m.created_at)', 'a.as_of_at')
    ) }} as strength,
    f.last_accessed,
    coalesce(f.access_count, 0) as access_count,
    a.as_of_at as strength_as_of
from memories as m
cross join as_of as a
left join folded as f using (memory_id)
