{#- Cosine recall. One statement answers several intents for one user.

    memories : relation or subquery with user_id, memory_id, kind, content, embedding,
               strength, source_message_ids (and optionally more columns, ignored)
    queries  : subquery with intent_id (int), embedding ({{ embedding_type() }})
    user_id  : SQL expression of the user scope (required: there is no all-users recall)
    top_k    : SQL expression, results per intent
    min_sim  : SQL expression, threshold on RAW cosine similarity (see docs/recall.md)
    kinds    : SQL expression of a VARCHAR[] of kinds, or NULL for all kinds
    dim      : embedding dimension (default var embedding_dim)
    current_only : skip superseded memories (valid_to set); true by default

    score = strength * similarity. NULL and NaN similarities (NULL or zero vectors) are dropped
    before ranking, so they can never rank first. -#}
{% macro recall_sql(memories, queries, user_id, top_k, min_sim, kinds='null', dim=none, current_only=true) -%}
with recall_queries as (
    {{ queries }}
),

scoped_memories as (
    select *
    from {{ memories }}
    where user_id = {{ user_id }}
      and ({{ kinds }} is null or list_contains({{ kinds }}, kind))
      {%- if current_only %}
      and valid_to is null
      {%- endif %}
),

scored as (
    select
        q.intent_id,
        m.memory_id,
        m.kind,
        m.content,
        m.strength,
        m.source_message_ids,
        array_cosine_similarity(m.embedding::{{ embedding_type(dim) }}, q.embedding::{{ embedding_type(dim) }}) as similarity
    from recall_queries as q
    cross join scoped_memories as m
),

kept as (
    select
        *,
        strength * similarity as score
    from scored
    where similarity is not null
      and not isnan(similarity)
      and similarity >= {{ min_sim }}
),

ranked as (
    select
        *,
        row_number() over (partition by intent_id order by score desc, memory_id) as rank
    from kept
)

select
    intent_id,
    rank,
    memory_id,
    kind,
    content,
    similarity,
    strength,
    score,
    source_message_ids
from ranked
where rank <= {{ top_k }}
order by intent_id, rank
{%- endmacro %}

{#- The statement the shim runs per request, with bound parameters:
    $1 user_id VARCHAR, $2 query vectors FLOAT[dim][] (one per intent), $3 top_k INTEGER,
    $4 min_sim DOUBLE, $5 kinds VARCHAR[] or NULL. Relations carry no database name, so the
    same text runs against any published snapshot file. -#}
{% macro shim_recall_sql() -%}
{{ recall_sql(
    memories=ref('long_term_memory').include(database=False),
    queries="select generate_subscripts($2::" ~ embedding_type() ~ "[], 1) as intent_id, unnest($2::" ~ embedding_type() ~ "[]) as embedding",
    user_id='$1::varchar',
    top_k='$3::integer',
    min_sim='$4::double',
    kinds='$5::varchar[]'
) }}
{%- endmacro %}
