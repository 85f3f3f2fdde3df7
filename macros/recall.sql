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
    agent_id, session_id : optional narrower scopes inside the user scope: SQL expressions of a
               VARCHAR or NULL (no filter); a memory matches when one of its source messages
               came from that agent / session (columns agent_ids, session_ids). None = no filter.

    score = strength * similarity. NULL and NaN similarities (NULL or zero vectors) are dropped
    before ranking, so they can never rank first. -#}
{% macro recall_sql(memories, queries, user_id, top_k, min_sim, kinds='null', dim=none, current_only=true,
                    agent_id=none, session_id=none) -%}
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
      {%- if agent_id is not none %}
      and ({{ agent_id }} is null or list_contains(agent_ids, {{ agent_id }}))
      {%- endif %}
      {%- if session_id is not none %}
      and ({{ session_id }} is null or list_contains(session_ids, {{ session_id }}))
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
    $4 min_sim DOUBLE, $5 kinds VARCHAR[] or NULL, $6 query texts VARCHAR[] (one per intent,
    NULL entries for precomputed vectors), $7 agent_id VARCHAR or NULL, $8 session_id VARCHAR or
    NULL. Relations carry no database name, so the same text runs against any published
    snapshot file. -#}
{% macro shim_recall_sql() -%}
{{ recall_sql(
    memories=ref('long_term_memory').include(database=False),
    queries="select generate_subscripts($2::" ~ embedding_type() ~ "[], 1) as intent_id, unnest($2::" ~ embedding_type() ~ "[]) as embedding, unnest($6::varchar[]) as query_text",
    user_id='$1::varchar',
    top_k='$3::integer',
    min_sim='$4::double',
    kinds='$5::varchar[]',
    agent_id='$7::varchar',
    session_id='$8::varchar'
) }}
{%- endmacro %}
