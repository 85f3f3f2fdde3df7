{#- Reference design, stage 3: three 4-d memories and the query [0.85,0.15,0.20,0.05] rank
    preference 0.996, skill 0.444, fact 0.351 (strength 1.0, so score = similarity).
    Returns a row for every rank whose kind or similarity differs. -#}
{{ config(tags=['seed_fidelity']) }}

with seed_memories as (
    {{ seed_demo_memories() }}
),

results as (
    {{ recall_sql(
        memories='seed_memories',
        queries='select 1 as intent_id, ' ~ vector_literal('0.85, 0.15, 0.20, 0.05', 4) ~ ' as embedding',
        user_id="'demo'",
        top_k=3,
        min_sim=-1,
        dim=4,
        fusion='vector'
    ) }}
),

expected as (
    select 1 as rank, 'preference' as kind, 0.996 as similarity
    union all
    select 2 as rank, 'skill' as kind, 0.444 as similarity
    union all
    select 3 as rank, 'fact' as kind, 0.351 as similarity
)

select
    expected.rank,
    expected.kind as expected_kind,
    results.kind as actual_kind,
    expected.similarity as expected_similarity,
    results.similarity as actual_similarity
from expected
full outer join results using (rank)
where expected.kind is distinct from results.kind
    or abs({{ round_places('results.similarity', 3) }} - expected.similarity) > 0.0005
    or results.similarity is null
