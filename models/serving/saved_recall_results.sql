{#- One row per (standing intent, rank): what recall returns for each row of recall_intents,
    with the shipped defaults (recall_top_k, recall_min_sim), each intent scoped to its user. -#}
with intents as (
    select
        row_number() over (order by intent_id) as intent_seq,
        *
    from {{ ref('int_recall_intent_embeddings') }}
),

per_user as (
    select
        i.intent_id,
        i.query_text,
        i.user_id,
        r.rank,
        r.memory_id,
        r.kind,
        r.content,
        r.similarity,
        r.strength,
        r.score
    from intents as i,
        lateral (
        {{ recall_sql(
            memories=ref('long_term_memory'),
            queries='select i.intent_seq as intent_id, i.embedding, i.query_text',
            user_id='i.user_id',
            top_k=number_var('recall_top_k'),
            min_sim=number_var('recall_min_sim'),
            terms=ref('memory_term_index'),
            term_stats=ref('memory_term_stats')
        ) }}
        ) as r
)

select
    intent_id || ':' || rank as result_id,
    *
from per_user
