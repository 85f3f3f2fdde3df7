-- Decay curves: observed strength history and the projected decay of every current memory.
-- One row per (memory_id, source, at): source 'observed' rows come from the snapshot
-- memory_strength_history (one per build that changed the value); source 'projected' rows
-- continue from the current strength for horizon_days days with no further access, using the
-- same decay_strength macro as the build (var decay_rate_per_day, floor var strength_floor).
{% set horizon_days = 60 %}
with current_memories as (
    select memory_id, user_id, kind, strength, strength_as_of
    from {{ ref('long_term_memory') }}
    where valid_to is null
),

observed as (
    select
        h.memory_id,
        h.user_id,
        h.kind,
        'observed' as source,
        h.strength_as_of as strength_at,
        null::integer as days_ahead,
        h.strength
    from {{ ref('memory_strength_history') }} as h
    inner join current_memories using (memory_id)
),

projected as (
    select
        m.memory_id,
        m.user_id,
        m.kind,
        'projected' as source,
        m.strength_as_of + to_days(d.days_ahead) as strength_at,
        d.days_ahead,
        {{ decay_strength('m.strength', 'd.days_ahead') }} as strength
    from current_memories as m
    cross join (select unnest(generate_series(1, {{ horizon_days }})) as days_ahead) as d
)

select * from observed
union all
select * from projected
order by memory_id, strength_at
