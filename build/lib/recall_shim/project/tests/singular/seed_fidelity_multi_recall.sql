{#- Reference design, multi-recall: three intents in one statement at similarity > 0.4 return
    exactly the groups the design lists, in order. Returns a row per intent that differs. -#}
{{ config(tags=['seed_fidelity']) }}

with seed_memories as (
    {{ seed_demo_memories() }}
),

intents as (
    select 1 as intent_id, '喜欢什么输出方式' as intent, {{ vector_literal('0.85, 0.15, 0.20, 0.05', 4) }} as embedding
    union all
    select 2 as intent_id, '做过什么数据分析' as intent, {{ vector_literal('0.10, 0.80, 0.30, 0.10', 4) }} as embedding
    union all
    select 3 as intent_id, '熟悉什么部署工具' as intent, {{ vector_literal('0.20, 0.10, 0.90, 0.00', 4) }} as embedding
),

results as (
    {{ recall_sql(
        memories='seed_memories',
        queries='select intent_id, embedding from intents',
        user_id="'demo'",
        top_k=10,
        min_sim=0.4,
        dim=4,
        fusion='vector'
    ) }}
),

actual as (
    select intent_id, string_agg(content, ' / ' order by rank) as top_memories
    from results
    group by intent_id
),

expected as (
    select 1 as intent_id, '用户偏好简洁输出、喜欢表格 / 用户熟悉 Cloudflare Tunnel 部署' as top_memories
    union all
    select 2 as intent_id, '用户用 DuckDB 做过销售数据分析 / 用户熟悉 Cloudflare Tunnel 部署' as top_memories
    union all
    select
        3 as intent_id,
        '用户熟悉 Cloudflare Tunnel 部署 / 用户用 DuckDB 做过销售数据分析 / 用户偏好简洁输出、喜欢表格' as top_memories
)

select expected.intent_id, expected.top_memories as expected, actual.top_memories as actual
from expected
full outer join actual using (intent_id)
where expected.top_memories is distinct from actual.top_memories
