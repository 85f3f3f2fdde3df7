{#- Reference design, stage 4: a memory last accessed 30 days ago decays to the 0.3 floor
    (0.95^30 = 0.215 < 0.3); one access lifts strength by s*0.95+0.05; decay without a floor hit
    is 0.95^days; and the event fold decays then reinforces. Returns a row per failed check.
    The reference design's numbers are passed explicitly, so the check holds whatever the vars. -#}
{{ config(tags=['seed_fidelity']) }}

with checks as (
    select
        '30 days without access -> floor 0.3' as check_name,
        {{ decay_strength('1.0', 30, 0.95, 0.3) }} as actual,
        0.3 as expected
    union all
    select
        '10 days -> 0.95^10' as check_name,
        {{ decay_strength('1.0', 10, 0.95, 0.3) }} as actual,
        pow(0.95, 10) as expected
    union all
    select
        '100 days -> floor' as check_name,
        {{ decay_strength('1.0', 100, 0.95, 0.3) }} as actual,
        0.3 as expected
    union all
    select
        'one access lifts 0.5 -> 0.525' as check_name,
        {{ reinforce_strength('0.5', 0.05, 0.3) }} as actual,
        0.5 * 0.95 + 0.05 as expected
    union all
    select
        'one access lifts the floor 0.3 -> 0.335' as check_name,
        {{ reinforce_strength('0.3', 0.05, 0.3) }} as actual,
        0.335 as expected
    union all
    select
        'fold: access after 2 days, none before' as check_name,
        {{ fold_strength(double_list_literal('2.0'), 0.95, 0.3, 0.05) }} as actual,
        pow(0.95, 2) * 0.95 + 0.05 as expected
    union all
    select
        'fold: no events stays 1.0' as check_name,
        {{ fold_strength(double_list_literal(''), 0.95, 0.3, 0.05) }} as actual,
        1.0 as expected
)

select *
from checks
where actual is null or abs(actual - expected) > 1e-9
