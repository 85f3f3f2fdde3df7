{#- One row per standing recall intent with its query embedding (model var embedding_model,
    form var embedding_query_form). -#}
select
    intent_id,
    user_id,
    query_text,
    {{ embed_sql('query_text', choice_var('embedding_query_form')) }} as embedding
from {{ ref('recall_intents') }}
