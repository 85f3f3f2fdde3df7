{#- Hybrid recall. One statement answers several intents for one user.

    memories   : relation/subquery with user_id, memory_id, kind, content, embedding, strength,
                 source_message_ids, valid_to, is_question (more columns are ignored)
    queries    : subquery with intent_id (int), embedding (FLOAT[dim]) and query_text (VARCHAR,
                 may be NULL: a precomputed vector has no lexical leg)
    user_id    : SQL expression of the user scope (required: there is no all-users recall)
    top_k      : SQL expression, results per intent
    min_sim    : SQL expression, threshold on RAW cosine similarity (docs/recall.md)
    kinds      : SQL expression of a VARCHAR[] of kinds, or NULL for the default kinds (all kinds;
                 without 'episode' when var recall_episodes_by_default is false)
    dim        : embedding dimension (default var embedding_dim)
    current_only : skip superseded memories (valid_to set); true by default
    terms, term_stats : the lexical index relations (memory_term_index, memory_term_stats);
                 required unless fusion is 'vector'
    fusion     : 'weighted' | 'rrf' | 'vector' | 'lexical' (default var fusion_method)
    agent_id, session_id : optional narrower scopes inside the user scope: SQL expressions of a
                 VARCHAR or NULL (no filter); a memory matches when one of its source messages
                 came from that agent / session (columns agent_ids, session_ids). None = no filter.

    Legs: vector = cosine over the user's memories (NULL/NaN dropped, so NULL or zero vectors
    never rank), with its rank and the per-intent min / max cosine; lexical = BM25 over the term
    index with the same tokenize macro on the query, with its rank. The legs make one candidate
    row per (intent, scoped memory with a vector); recall_rank_sql does the rest (recall_score:
    fusion, strength factor, question weight; raw-cosine threshold; ranking, ties by memory_id;
    top_k). The serving index runs the same recall_rank_sql on candidates it proposes
    (shim_rank_sql, docs/serving.md). -#}
{% macro recall_sql(memories, queries, user_id, top_k, min_sim, kinds='null', dim=none, current_only=true,
                    terms=none, term_stats=none, fusion=none, agent_id=none, session_id=none) -%}
{%- set fusion = fusion if fusion is not none else choice_var('fusion_method') -%}
{%- if fusion not in ('weighted', 'rrf', 'vector', 'lexical') -%}
  {{ exceptions.raise_compiler_error("fusion must be weighted, rrf, vector or lexical, got " ~ fusion) }}
{%- endif -%}
{%- set lexical = fusion != 'vector' -%}
{%- if lexical and (terms is none or term_stats is none) -%}
  {{ exceptions.raise_compiler_error("recall_sql with fusion " ~ fusion ~ " needs terms and term_stats") }}
{%- endif -%}
with recall_queries as (
    {{ queries }}
),

scoped_memories as (
    select *
    from {{ memories }}
    where user_id = {{ user_id }}
      and (
          ({{ kinds }} is null
           {%- if not bool_var('recall_episodes_by_default') %} and kind != 'episode'{% endif %})
          or {{ list_has(kinds, 'kind') }}
      )
      {%- if current_only %}
      and valid_to is null
      {%- endif %}
      {%- if agent_id is not none %}
      and ({{ agent_id }} is null or {{ list_has('agent_ids', agent_id) }})
      {%- endif %}
      {%- if session_id is not none %}
      and ({{ session_id }} is null or {{ list_has('session_ids', session_id) }})
      {%- endif %}
),

vector_leg as (
    select
        q.intent_id,
        m.memory_id,
        {{ cosine_similarity('m.embedding', 'q.embedding', dim) }} as similarity
    from recall_queries as q
    cross join scoped_memories as m
),

vector_ranked as (
    select
        *,
        row_number() over (partition by intent_id order by similarity desc, memory_id) as vector_rank
    from vector_leg
    where similarity is not null
      and not {{ is_nan('similarity') }}
),

{% if lexical -%}
query_terms as (
    select distinct
        intent_id,
        unnest({{ tokenize('query_text') }}) as term
    from recall_queries
),

lexical_leg as (
    select
        qt.intent_id,
        t.memory_id,
        sum({{ bm25_term('t.tf', 't.doc_len', 's.avg_doc_len', 's.n_docs', 's.df') }}) as lexical_score
    from query_terms as qt
    inner join {{ term_stats }} as s
        on s.user_id = {{ user_id }} and s.term = qt.term
    inner join {{ terms }} as t
        on t.user_id = {{ user_id }} and t.term = qt.term
    where t.memory_id in (select memory_id from scoped_memories)
    group by qt.intent_id, t.memory_id
),

lexical_ranked as (
    select
        *,
        row_number() over (partition by intent_id order by lexical_score desc, memory_id) as lexical_rank
    from lexical_leg
),
{%- endif %}

candidates as (
    select
        v.intent_id,
        v.memory_id,
        v.similarity,
        min(v.similarity) over intent_window as sim_min,
        max(v.similarity) over intent_window as sim_max,
        v.vector_rank,
        {% if lexical -%}
        l.lexical_score,
        l.lexical_rank,
        {%- else -%}
        null::{{ double_type() }} as lexical_score,
        null::bigint as lexical_rank,
        {%- endif %}
        m.kind,
        m.content,
        m.strength,
        m.source_message_ids,
        m.is_question
    from vector_ranked as v
    {% if lexical -%}
    left join lexical_ranked as l using (intent_id, memory_id)
    {%- endif %}
    inner join scoped_memories as m using (memory_id)
    window intent_window as (partition by v.intent_id)
)

{{ recall_rank_sql('candidates', top_k, min_sim, fusion) }}
{%- endmacro %}

{#- The score of one (intent, memory): THE recall formula, the only place it is written
    (docs/recall.md). Every argument is an SQL expression:
    similarity   raw cosine;  sim_min, sim_max: min / max cosine over the user's scoped memories
                 for the intent (weighted fusion);  lexical_score: BM25, NULL = no lexical match;
    vector_rank, lexical_rank: the legs' ranks (rrf; lexical_rank NULL = no lexical match);
    strength, is_question: the memory's. fusion: as in recall_sql.
    relevance: weighted = w * (similarity - sim_min) / (sim_max - sim_min) (1 when they are equal)
    + (1-w) * bm25 / (bm25 + var lexical_saturation); rrf = w/(k + vector_rank) + (1-w)/(k +
    lexical_rank); vector = cosine; lexical = BM25. score = relevance * (1 - s + s * strength) *
    (var question_episode_weight when is_question), s = var strength_weight. -#}
{% macro recall_score(fusion, similarity, sim_min, sim_max, lexical_score, vector_rank, lexical_rank, strength,
                      is_question) -%}
{%- set w = number_var('fusion_vector_weight') -%}
{%- set k = number_var('fusion_rrf_k') -%}
{%- set sw = number_var('strength_weight') -%}
(
    {% if fusion == 'weighted' -%}
    {{ w }} * coalesce(({{ similarity }} - {{ sim_min }}) / nullif({{ sim_max }} - {{ sim_min }}, 0), 1)
        + (1 - {{ w }}) * coalesce({{ lexical_score }} / ({{ lexical_score }} + {{ number_var('lexical_saturation') }}), 0)
    {%- elif fusion == 'rrf' -%}
    {{ w }} / ({{ k }} + {{ vector_rank }})
        + coalesce((1 - {{ w }}) / ({{ k }} + {{ lexical_rank }}), 0)
    {%- elif fusion == 'lexical' -%}
    coalesce({{ lexical_score }}, 0)
    {%- else -%}
    {{ similarity }}
    {%- endif %}
)
    * (1 - {{ sw }} + {{ sw }} * {{ strength }})
    * case when {{ is_question }} then {{ number_var('question_episode_weight') }} else 1 end
{%- endmacro %}

{#- Rank candidates: everything of recall that is not a leg. candidates: a relation with, per
    (intent_id, memory_id): similarity, sim_min, sim_max, vector_rank, lexical_score, lexical_rank
    (as recall_score's arguments), strength, is_question, and the payload kind, content,
    source_message_ids. Drops rows below min_sim (raw cosine), scores with recall_score, ranks by
    score desc then memory_id, keeps top_k per intent. Used by recall_sql (candidates = every
    scoped memory) and by the serving index's rank statement (candidates = what an index
    proposed; shim_rank_sql). -#}
{% macro recall_rank_sql(candidates, top_k, min_sim, fusion=none) -%}
{%- set fusion = fusion if fusion is not none else choice_var('fusion_method') -%}
select
    intent_id,
    rank,
    memory_id,
    kind,
    content,
    similarity,
    strength,
    score,
    source_message_ids,
    coalesce(lexical_score, 0) as lexical_score
from (
    select
        s.*,
        row_number() over (partition by s.intent_id order by s.score desc, s.memory_id) as rank
    from (
        select
            c.*,
            {{ recall_score(fusion, 'c.similarity', 'c.sim_min', 'c.sim_max', 'c.lexical_score', 'c.vector_rank',
                            'c.lexical_rank', 'c.strength', 'c.is_question') }} as score
        from {{ candidates }} as c
        where c.similarity >= {{ min_sim }}
    ) as s
) as ranked
where rank <= {{ top_k }}
order by intent_id, rank
{%- endmacro %}

{#- The serving index's rank statement (recall_shim/serving/rank.py): candidates an index proposed,
    ranked by recall_rank_sql, plus per intent the score of the bound rows (what any memory
    outside the candidates could at most reach), scored by the same recall_score. Bound
    parameters, arrays zipped by position:
    candidates  $1 intent_id INTEGER[], $2 memory_id VARCHAR[], $3 similarity DOUBLE[],
                $4 lexical_score DOUBLE[] (NULL: no match), $5 strength DOUBLE[], $6 is_question
                BOOLEAN[], $7 vector_rank BIGINT[], $8 lexical_rank BIGINT[] (NULL: no match)
    per intent  $9 sim_min DOUBLE[], $10 sim_max DOUBLE[] (entry i for intent_id i)
    $11 top_k INTEGER, $12 min_sim DOUBLE
    bound rows  $13 intent_id INTEGER[], $14 similarity, $15 lexical_score, $16 vector_rank,
                $17 lexical_rank, $18 strength, $19 is_question (as the candidates'), $20 part
                INTEGER[] (0: the bound of every outsider; 1: the vector leg's alone, lexical NULL,
                which tells the caller which leg to widen)
    Returns (intent_id, rank, memory_id, similarity, score, lexical_score): candidates ranked
    1..top_k, and rank -part with the best bound score of the intent (no row: no bound row
    reaches min_sim). The payload (kind, content, sources) stays with the index. -#}
{% macro shim_rank_sql(fusion=none) -%}
{%- set d = double_type() -%}
with candidates as (
    select
        c.intent_id,
        c.memory_id,
        c.similarity,
        ($9::{{ d }}[])[c.intent_id] as sim_min,
        ($10::{{ d }}[])[c.intent_id] as sim_max,
        c.vector_rank,
        c.lexical_score,
        c.lexical_rank,
        null::varchar as kind,
        null::varchar as content,
        c.strength,
        null::varchar[] as source_message_ids,
        c.is_question
    from (
        select
            unnest($1::integer[]) as intent_id,
            unnest($2::varchar[]) as memory_id,
            unnest($3::{{ d }}[]) as similarity,
            unnest($4::{{ d }}[]) as lexical_score,
            unnest($5::{{ d }}[]) as strength,
            unnest($6::boolean[]) as is_question,
            unnest($7::bigint[]) as vector_rank,
            unnest($8::bigint[]) as lexical_rank
    ) as c
),

bound_rows as (
    select
        unnest($13::integer[]) as intent_id,
        unnest($14::{{ d }}[]) as similarity,
        unnest($15::{{ d }}[]) as lexical_score,
        unnest($16::bigint[]) as vector_rank,
        unnest($17::bigint[]) as lexical_rank,
        unnest($18::{{ d }}[]) as strength,
        unnest($19::boolean[]) as is_question,
        unnest($20::integer[]) as part
),

bounds as (
    select
        b.intent_id,
        b.part,
        max({{ recall_score(fusion if fusion is not none else choice_var('fusion_method'), 'b.similarity',
                            '($9::' ~ d ~ '[])[b.intent_id]', '($10::' ~ d ~ '[])[b.intent_id]', 'b.lexical_score',
                            'b.vector_rank', 'b.lexical_rank', 'b.strength', 'b.is_question') }}) as score
    from bound_rows as b
    where b.similarity >= $12::{{ d }}
    group by b.intent_id, b.part
)

select intent_id, rank, memory_id, similarity, score, lexical_score
from ({{ recall_rank_sql('candidates', '$11::integer', '$12::' ~ d, fusion) }}) as ranked
union all
select intent_id, -part as rank, null as memory_id, null as similarity, score, null as lexical_score
from bounds
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
    min_sim='$4::' ~ double_type(),
    kinds='$5::varchar[]',
    terms=ref('memory_term_index').include(database=False),
    term_stats=ref('memory_term_stats').include(database=False),
    agent_id='$7::varchar',
    session_id='$8::varchar'
) }}
{%- endmacro %}

{#- Every (intent, memory) cosine of one user's current memories, for threshold guidance (the
    reference design advises picking min_sim from the similarity distribution).
    memories, queries, user_id, dim: as in recall_sql. NULL/NaN similarities are dropped. -#}
{% macro similarity_distribution_sql(memories, queries, user_id, dim=none) -%}
with recall_queries as (
    {{ queries }}
),

scored as (
    select
        q.intent_id,
        m.memory_id,
        m.kind,
        {{ cosine_similarity('m.embedding', 'q.embedding', dim) }} as similarity
    from recall_queries as q
    cross join {{ memories }} as m
    where m.user_id = {{ user_id }}
      and m.valid_to is null
)

select intent_id, memory_id, kind, similarity
from scored
where similarity is not null and not {{ is_nan('similarity') }}
order by intent_id, similarity desc
{%- endmacro %}

{#- The shim's threshold-guidance statement: $1 user_id, $2 query vectors FLOAT[dim][]. -#}
{% macro shim_similarity_sql() -%}
{{ similarity_distribution_sql(
    memories=ref('long_term_memory').include(database=False),
    queries="select generate_subscripts($2::" ~ embedding_type() ~ "[], 1) as intent_id, unnest($2::" ~ embedding_type() ~ "[]) as embedding",
    user_id='$1::varchar'
) }}
{%- endmacro %}

{#- The lexical leg of recall_sql on its own, for the serving index's hybrid fusion
    (recall_shim/serving/hybrid.py): every term-index match of one user's memories with its BM25 score
    per intent, computed exactly as recall_sql's lexical_leg (same tokenize, same distinct query
    terms, same bm25_term, same per-user statistics). The kind filter and the vector leg are
    applied by the caller; id64 is the index's row key (md5_number_upper(memory_id) >> 2).
    terms, term_stats: as in recall_sql; queries: subquery of (intent_id, query_text);
    user_id: SQL expression of the user scope. -#}
{% macro lexical_scores_sql(terms, term_stats, queries, user_id) -%}
with recall_queries as (
    {{ queries }}
),

query_terms as (
    select distinct
        intent_id,
        unnest({{ tokenize('query_text') }}) as term
    from recall_queries
)

select
    qt.intent_id,
    t.memory_id,
    (md5_number_upper(t.memory_id) >> 2)::bigint as id64,
    sum({{ bm25_term('t.tf', 't.doc_len', 's.avg_doc_len', 's.n_docs', 's.df') }}) as lexical_score
from query_terms as qt
inner join {{ term_stats }} as s
    on s.user_id = {{ user_id }} and s.term = qt.term
inner join {{ terms }} as t
    on t.user_id = {{ user_id }} and t.term = qt.term
group by qt.intent_id, t.memory_id
{%- endmacro %}

{#- The shim's lexical-leg statement: $1 user_id VARCHAR, $2 query texts VARCHAR[] (one per
    intent, NULL entries have no lexical leg). -#}
{% macro shim_lexical_sql() -%}
{{ lexical_scores_sql(
    terms=ref('memory_term_index').include(database=False),
    term_stats=ref('memory_term_stats').include(database=False),
    queries="select generate_subscripts($2::varchar[], 1) as intent_id, unnest($2::varchar[]) as query_text",
    user_id='$1::varchar'
) }}
{%- endmacro %}


{#- PostgreSQL's indexed recall for one intent (recall_shim/targets/postgres/ann.py): the HNSW index proposes
    the query's nearest memories of the user (hnsw.ef_search set by the caller; the kind filter
    runs after the index scan), recall_rank_sql ranks them, and the bound row (the farthest
    candidate's cosine at every corner of strength in [0, 1] x is_question, scored by
    recall_score) comes back as rank 0 unless that cosine is below min_sim (no candidate: an
    infinite cosine, so the caller widens). The caller accepts the answer when the k-th score
    beats the bound, as the DuckDB serving index does.
    $1 user_id, $2 query vector (text), $3 kinds VARCHAR[] or NULL, $4 candidates (the LIMIT),
    $5 top_k, $6 min_sim. Vector fusion: the fusion the HNSW path serves. -#}
{% macro pg_ann_rank_sql() -%}
{%- set d = double_type() -%}
{%- set vec = embedding_type() -%}
with nearest as (
    select
        memory_id,
        kind,
        content,
        strength,
        source_message_ids,
        is_question,
        {{ vector_cosine('embedding::' ~ vec, '$2::' ~ vec) }} as similarity
    from {{ ref('long_term_memory').include(database=False) }}
    where user_id = $1::varchar
      and valid_to is null
      and (
          ($3::varchar[] is null
           {%- if not bool_var('recall_episodes_by_default') %} and kind != 'episode'{% endif %})
          or {{ list_has('$3::varchar[]', 'kind') }}
      )
    order by embedding::{{ vec }} <=> $2::{{ vec }}
    limit $4::integer
),

candidates as (
    select
        1 as intent_id,
        memory_id,
        similarity,
        null::{{ d }} as sim_min,
        null::{{ d }} as sim_max,
        null::bigint as vector_rank,
        null::{{ d }} as lexical_score,
        null::bigint as lexical_rank,
        kind,
        content,
        strength,
        source_message_ids,
        is_question
    from nearest
    where similarity is not null and not {{ is_nan('similarity') }}
),

bound as (
    select
        max({{ recall_score('vector', 'f.similarity', 'null', 'null', 'null', 'null', 'null', 'c.strength',
                            'c.is_question') }}) as score
    from (
        select coalesce(min(similarity), 'Infinity'::{{ d }}) as similarity
        from nearest
    ) as f
    cross join (values (0::{{ d }}, false), (1::{{ d }}, false), (0::{{ d }}, true), (1::{{ d }}, true))
        as c (strength, is_question)
    where f.similarity >= $6::{{ d }}
)

select * from ({{ recall_rank_sql('candidates', '$5::integer', '$6::' ~ d, 'vector') }}) as ranked
union all
select 1, 0, null, null, null, null, null, score, null, null
from bound
where score is not null
{%- endmacro %}
