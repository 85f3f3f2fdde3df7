-- Strength distribution of current memories, per kind.
-- One row per (kind, strength bin of width bin_width): how many memories, and their share of the
-- kind. Strength starts at 1, decays by var decay_rate_per_day to var strength_floor, and
-- recovers on every mention or recall access (see docs/recall.md).
{% set bin_width = 0.05 %}
with current_memories as (
    select kind, strength
    from {{ ref('long_term_memory') }}
    where valid_to is null
),

binned as (
    select
        kind,
        -- the epsilon keeps values on a bin edge (0.3 = the floor) in the bin they start
        least(floor(strength / {{ bin_width }} + 1e-9), 1 / {{ bin_width }} - 1) * {{ bin_width }} as strength_from,
        count(*) as memories
    from current_memories
    group by all
)

select
    kind,
    round(strength_from, 2) as strength_from,
    round(strength_from + {{ bin_width }}, 2) as strength_to,
    memories,
    round(memories / sum(memories) over (partition by kind), 3) as share_of_kind
from binned
order by kind, strength_from
