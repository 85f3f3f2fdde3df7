{#- THE RECALL SCORE, written once. score = recall_score(recall_relevance(..), recall_factor(..)).
    Each macro renders one expression in a dialect: 'sql' (DuckDB and PostgreSQL: recall_sql, so
    the compiled statement and analysts) or 'numpy' (a Python expression over numpy arrays,
    published with the var values in recall_queries and evaluated by the serving index, the
    PostgreSQL HNSW path and their pruning bounds: recall_shim/serving/formula.py). The
    arguments are the expressions of the inputs; by default their numpy names.
    Dialect primitives: coalesce(x, d) and nullif(x, 0) read the same in both (in numpy, NaN
    stands for NULL and the shim defines the two functions); recall_if differs.
    Contract the shim's pruning bounds rely on (tests_py/test_recall_definition.py checks it):
    the relevance is non-decreasing in cos, bm25 and -rank; the factor is non-decreasing in
    strength and at least 0; the score is non-decreasing in the relevance for a factor >= 0 and
    monotone in the factor. -#}
{% macro recall_if(condition, then, otherwise, dialect) -%}
{%- if dialect == 'sql' -%}
case when {{ condition }} then {{ then }} else {{ otherwise }} end
{%- elif dialect == 'numpy' -%}
where({{ condition }}, {{ then }}, {{ otherwise }})
{%- else -%}
{{ exceptions.raise_compiler_error("recall dialect must be sql or numpy, got " ~ dialect) }}
{%- endif -%}
{%- endmacro %}

{#- Relevance of a memory to an intent by var fusion_method (or `fusion`):
    weighted = w x min-max normalised cosine (cos_min / cos_max: per intent over the user's scoped
    memories; equal gives 1) + (1 - w) x bm25 / (bm25 + var lexical_saturation) (no lexical match
    adds 0); rrf = w / (k + vector_rank) + (1 - w) / (k + lexical_rank) (no lexical match adds 0);
    vector = cos; lexical = bm25 (0 without a match). w = var fusion_vector_weight, k = var
    fusion_rrf_k. bm25 and lexical_rank are NULL (numpy: NaN; bm25 may also be 0) without a
    lexical match. -#}
{% macro recall_relevance(fusion=none, dialect='sql', cos='cos', cos_min='cos_min', cos_max='cos_max', bm25='bm25',
                          vector_rank='vector_rank', lexical_rank='lexical_rank') -%}
{%- set fusion = fusion if fusion is not none else choice_var('fusion_method') -%}
{%- set w = number_var('fusion_vector_weight') -%}
{%- set k = number_var('fusion_rrf_k') -%}
{%- if dialect not in ('sql', 'numpy') -%}
  {{ exceptions.raise_compiler_error("recall dialect must be sql or numpy, got " ~ dialect) }}
{%- endif -%}
{%- if fusion == 'weighted' -%}
{{ w }} * coalesce(({{ cos }} - {{ cos_min }}) / nullif({{ cos_max }} - {{ cos_min }}, 0), 1)
    + (1 - {{ w }}) * coalesce({{ bm25 }} / ({{ bm25 }} + {{ number_var('lexical_saturation') }}), 0)
{%- elif fusion == 'rrf' -%}
{{ w }} / ({{ k }} + {{ vector_rank }}) + coalesce((1 - {{ w }}) / ({{ k }} + {{ lexical_rank }}), 0)
{%- elif fusion == 'lexical' -%}
coalesce({{ bm25 }}, 0)
{%- elif fusion == 'vector' -%}
{{ cos }}
{%- else -%}
{{ exceptions.raise_compiler_error("fusion must be weighted, rrf, vector or lexical, got " ~ fusion) }}
{%- endif -%}
{%- endmacro %}

{#- The memory's multiplier: (1 - s + s x strength), s = var strength_weight (1.0 is the reference
    design's strength x similarity), times var question_episode_weight for episodes that are
    questions (is_question), times var assistant_memory_weight when is_assistant (the memory is
    what the assistant said: kind 'assistant') differs from to_assistant (the intent's question
    asks what the assistant said: var assistant_question_pattern on the lower-cased query text,
    recall_sql's `addressed`; false for fusions without a lexical leg, which have no text). So an
    ordinary question weighs the assistant's memories, a question about what the assistant said
    weighs every other memory. is_assistant is per memory, to_assistant per intent (numpy: a
    scalar or an array broadcast against the memories). Times var time_scope_weight when in_window
    (the question names a time, "last week", "去年", and the memory was said or happened in it:
    recall_sql's time_windows; per memory and intent; the factor leaves the term out when the var
    is 1, the off switch). Times var slot_question_weight when slot_asked (the question asks for
    the memory's slot: "who am I?" and a name, seeds/question_slots.csv, recall_sql's
    asked_slots; per memory and intent; left out when the var is 1). At least 0 for
    non-negative weights, non-decreasing in strength; its maximum over a set of memories is
    (1 - s + s x max strength) x max(1, question weight) x max(1, assistant weight) x max(1, time
    weight) x max(1, slot weight) at most. Times (1 + (c - 1) x recency) when asks_current (the
    question asks for the current state: var current_question_pattern, "do I still ...", "where
    do I live now?", "我现在..."; per intent; not when the question names a time, "what was I
    currently reading in May?", which the time scope weighs), c = var current_question_weight,
    recency per memory and intent in [0, 1]: when it was said within the span of the user's
    scoped memories (the newest 1; recall_sql's memory_recency); left out when c is 1. So the
    newest memory weighs c, the oldest 1, and the maximum above takes max(1, c) too. -#}
{% macro recall_factor(dialect='sql', strength='strength', is_question='is_question', is_assistant='is_assistant',
                       to_assistant='to_assistant', in_window='in_window', slot_asked='slot_asked',
                       recency='recency', asks_current='asks_current') -%}
{%- set sw = number_var('strength_weight') -%}
{%- set tw = number_var('time_scope_weight') -%}
{%- set qw = number_var('slot_question_weight') -%}
{%- set cw = number_var('current_question_weight') -%}
(1 - {{ sw }} + {{ sw }} * {{ strength }}) * {{ recall_if(is_question, number_var('question_episode_weight'), 1, dialect) }}
    * {{ recall_if('(' ~ is_assistant ~ ') != (' ~ to_assistant ~ ')', number_var('assistant_memory_weight'), 1, dialect) }}
{%- if tw != 1 %}
    * {{ recall_if(in_window, tw, 1, dialect) }}
{%- endif %}
{%- if qw != 1 %}
    * {{ recall_if(slot_asked, qw, 1, dialect) }}
{%- endif %}
{%- if cw != 1 %}
    * {{ recall_if(asks_current, '(1 + ' ~ (cw - 1) ~ ' * ' ~ recency ~ ')', 1, dialect) }}
{%- endif %}
{%- endmacro %}

{#- The score: relevance x factor (dialect kept for symmetry: both render the same). -#}
{% macro recall_score(relevance='relevance', factor='factor', dialect='sql') -%}
({{ relevance }}) * ({{ factor }})
{%- endmacro %}

{#- The conversation lift (docs/recall.md "Conversation lift"): people talk about one thing for a
    few turns, so the answer often sits next to the turn that matches the question best ("what did
    Kim paint?" matches "I took up painting"; the painting is described in the reply). A memory's
    final score is its score plus var conversation_lift_weight x the harmonic mean of its score
    and `best`, the best score among the ranked memories said within var conversation_lift_turns
    turns of it in its session (itself included, so best >= score: a memory alone in its
    neighbourhood scores score x (1 + weight), one next to a far better match up to score x (1 +
    2 x weight)). The harmonic mean gives a memory of no relevance of its own nothing, so only
    memories about the question gain; its slopes are at most 2, so a rounding in the score moves
    the final score at most (1 + 2 x weight) times as much. Non-decreasing in score and in best
    (the pruning bounds rely on it); the weight 0 leaves the score as it is. -#}
{% macro recall_lift(score='score', best='best', dialect='sql') -%}
{%- set w = number_var('conversation_lift_weight') -%}
{%- set s = recall_max(score, 0, dialect) -%}
{%- set b = recall_max(best, 0, dialect) -%}
({{ score }}) + {{ w }} * coalesce(2 * {{ s }} * {{ b }} / nullif({{ s }} + {{ b }}, 0), 0)
{%- endmacro %}

{#- The larger of two values (SQL greatest, numpy maximum). -#}
{% macro recall_max(a, b, dialect) -%}
{%- if dialect == 'sql' -%}
greatest({{ a }}, {{ b }})
{%- elif dialect == 'numpy' -%}
maximum({{ a }}, {{ b }})
{%- else -%}
{{ exceptions.raise_compiler_error("recall dialect must be sql or numpy, got " ~ dialect) }}
{%- endif -%}
{%- endmacro %}

{#- Is the conversation lift on for this fusion? (Not for `vector`: cosine only, the reference
    design.) -#}
{% macro conversation_lift_on(fusion=none) -%}
{%- set fusion = fusion if fusion is not none else choice_var('fusion_method') -%}
{{ return(fusion != 'vector' and number_var('conversation_lift_weight') > 0) }}
{%- endmacro %}

{#- The expressions rendered for numpy with the build's vars, one line each (published in
    recall_queries: relevance_numpy, factor_numpy, score_numpy, lift_numpy; the lift '' when off). -#}
{% macro recall_formula_numpy(fusion=none) -%}
{{ return({
    'relevance': recall_relevance(fusion, 'numpy').split() | join(' '),
    'factor': recall_factor('numpy').split() | join(' '),
    'score': recall_score(dialect='numpy').split() | join(' '),
    'lift': (recall_lift(dialect='numpy').split() | join(' ')) if conversation_lift_on(fusion) else '',
}) }}
{%- endmacro %}

{#- Hybrid recall. One statement answers several intents for one user.

    memories   : relation/subquery with user_id, memory_id, kind, content, embedding, strength,
                 source_message_ids, valid_to, is_question, created_at, happened_on, happened_grain,
                 and turn_session_id, turn_seq unless the fusion is 'vector' or var
                 conversation_lift_weight is 0 (more columns are ignored)
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
    time_expressions, as_of : the time scope (docs/recall.md "Time-scoped recall"): the relation of
                 seeds/time_expressions.csv (its rows are inlined) and the SQL expression of the
                 TIMESTAMP a question's "last week" is resolved against. None (or var
                 time_scope_weight 1, or a fusion without a lexical leg) = no time scope.
    question_slots : the relation of seeds/question_slots.csv (its rows are inlined): a memory
                 whose slot the question asks for carries var slot_question_weight. None (or
                 the var 1, or a fusion without a lexical leg) = no slot weighting; otherwise
                 memories needs a slot column.

    Legs: vector = cosine over the user's memories (NULL/NaN dropped, so NULL or zero vectors
    never rank); lexical = BM25 over the term index with the same tokenize macro on the query.
    score = recall_score(recall_relevance(fusion, ...), recall_factor(...)): the one definition of
    the fusion, the strength factor, the episode weighting and the assistant weighting (below; the serving index evaluates
    the same macros rendered for numpy). Memories below min_sim cosine are dropped; the rest rank
    by score, ties by memory_id. Each result carries its dates, outside the score: said_at (the
    memory's created_at: when it was first said), happened_on and happened_grain (when the text
    says it happened; NULL when it does not). -#}
{% macro recall_sql(memories, queries, user_id, top_k, min_sim, kinds='null', dim=none, current_only=true,
                    terms=none, term_stats=none, fusion=none, agent_id=none, session_id=none,
                    time_expressions=none, as_of=none, question_slots=none) -%}
{%- set fusion = fusion if fusion is not none else choice_var('fusion_method') -%}
{%- if fusion not in ('weighted', 'rrf', 'vector', 'lexical') -%}
  {{ exceptions.raise_compiler_error("fusion must be weighted, rrf, vector or lexical, got " ~ fusion) }}
{%- endif -%}
{%- set lexical = fusion != 'vector' -%}
{%- set context = lexical and turn_context_on() -%}
{%- set timed = lexical and time_expressions is not none and number_var('time_scope_weight') != 1 -%}
{%- set slotted = lexical and question_slots is not none and number_var('slot_question_weight') != 1 -%}
{%- set current = lexical and number_var('current_question_weight') != 1 -%}
{%- set lifted = conversation_lift_on(fusion) -%}
{%- set lift_turns = number_var('conversation_lift_turns') -%}
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

{% if context -%}
-- every matching memory of the user's own BM25 (in scope or not: an episode lends its score to
-- its neighbours whatever the kind filter), then each scoped memory's own plus its neighbour
-- episodes' at the turn-context weights (turn_context_ctes)
lexical_own as (
    {{ lexical_own_sql('query_terms', terms, term_stats, user_id) }}
),

{{ turn_context_ctes(memories, 'scoped_memories', user_id) }},

lexical_leg as (
    select
        intent_id,
        memory_id,
        sum(lexical_score) as lexical_score
    from (
        select o.intent_id, o.memory_id, o.lexical_score
        from lexical_own as o
        where o.memory_id in (select memory_id from scoped_memories)
        union all
        select o.intent_id, k.memory_id, k.weight * o.lexical_score as lexical_score
        from turn_links as k
        inner join lexical_own as o on o.memory_id = k.neighbour_id
    ) as shares
    group by intent_id, memory_id
),
{%- else -%}
lexical_leg as (
    {{ lexical_own_sql('query_terms', terms, term_stats, user_id, only='scoped_memories') }}
),
{%- endif %}

lexical_ranked as (
    select
        *,
        row_number() over (partition by intent_id order by lexical_score desc, memory_id) as lexical_rank
    from lexical_leg
),

{% if timed -%}
-- the time a question names ("what did I say last week?", "去年..."): the time expression with
-- the lowest priority found in it (the extraction's match and resolver), as a window of its grain
-- (a week from its Monday) resolved against as_of
time_rules as (
    {{ inline_rows(time_expressions, [('time_rule_id', 'varchar'), ('priority', 'integer'), ('pattern', 'varchar'),
                                      ('grain', 'varchar'), ('shift', 'integer'), ('weekday', 'integer'),
                                      ('month', 'integer')]) }}
),

asked_times as (
    select
        q.intent_id,
        t.grain,
        {{ resolve_happened_on(as_of, 't.grain', 't.shift', 't.weekday', 't.month', 'q.query_text') }} as resolved,
        row_number() over (partition by q.intent_id order by t.priority, t.time_rule_id) as time_rank
    from recall_queries as q
    inner join time_rules as t on {{ time_expression_match('q.query_text', 't.pattern') }}
    where q.query_text is not null
),

time_windows as (
    select
        intent_id,
        case when grain = 'week' then cast(date_trunc('week', cast(resolved as timestamp)) as timestamp)
            else cast(resolved as timestamp) end as window_start,
        case grain
            when 'week' then cast(date_trunc('week', cast(resolved as timestamp)) as timestamp) + interval '7 day'
            when 'month' then cast(resolved as timestamp) + interval '1 month'
            when 'year' then cast(resolved as timestamp) + interval '1 year'
            else cast(resolved as timestamp) + interval '1 day'
        end as window_end
    from asked_times
    where time_rank = 1
),
{%- endif %}

{% if slotted -%}
-- the slots the question asks for ("who am I?": name; "where do I work now?": job, employer)
asked_slots as (
    {{ asked_slots_sql('recall_queries', question_slots) }}
),
{%- endif %}

-- does the question ask what the assistant said ("which laptop did you recommend?", "你之前建议...")?
addressed as (
    select
        intent_id,
        coalesce({{ regexp_search('lower(query_text)', sql_literal(string_var('assistant_question_pattern'))) }}, false)
            as to_assistant,
        {% if current -%}
        -- does it ask for the current state ("do I still ...?", "我现在...")?
        coalesce({{ regexp_search('lower(query_text)', sql_literal(string_var('current_question_pattern'))) }}, false)
        {%- else -%}
        false
        {%- endif %} as asks_current
    from recall_queries
),
{%- endif %}

{% if current -%}
-- the span of the user's scoped memories in time, and where each was said in it (0 the oldest, 1
-- the newest; 1 without a time or a span)
recency_bounds as (
    select
        min({{ epoch_seconds('created_at') }}) as said_lo,
        max({{ epoch_seconds('created_at') }}) as said_hi
    from scoped_memories
),

memory_recency as (
    select
        m.memory_id,
        cast(coalesce(({{ epoch_seconds('m.created_at') }} - b.said_lo) / nullif(b.said_hi - b.said_lo, 0), 1)
            as {{ double_type() }}) as recency
    from scoped_memories as m
    cross join recency_bounds as b
),
{%- endif %}

fused as (
    select
        v.intent_id,
        v.memory_id,
        v.similarity,
        {% if lexical -%}
        coalesce(l.lexical_score, 0) as lexical_score,
        {%- else -%}
        0::{{ double_type() }} as lexical_score,
        {%- endif %}
        {{ recall_relevance(fusion, 'sql', cos='v.similarity', cos_min='min(v.similarity) over intent_window',
                            cos_max='max(v.similarity) over intent_window', bm25='l.lexical_score',
                            vector_rank='v.vector_rank', lexical_rank='l.lexical_rank') }}
        as relevance
    from vector_ranked as v
    {% if lexical -%}
    left join lexical_ranked as l using (intent_id, memory_id)
    {%- endif %}
    window intent_window as (partition by v.intent_id)
),

kept as (
    select
        f.*,
        m.kind,
        m.content,
        m.strength,
        m.source_message_ids,
        m.created_at as said_at,
        m.happened_on,
        m.happened_grain,
        {% if lifted -%}
        m.turn_session_id,
        m.turn_seq,
        {% endif -%}
        {{ recall_score('f.relevance',
                        recall_factor('sql', strength='m.strength', is_question='m.is_question',
                                      is_assistant="(m.kind = 'assistant')",
                                      to_assistant=('a.to_assistant' if lexical else 'false'),
                                      in_window=('(coalesce(m.created_at >= w.window_start and m.created_at < w.window_end, false)'
                                                 ' or coalesce(m.happened_on >= w.window_start and m.happened_on < w.window_end, false))'
                                                 if timed else 'false'),
                                      slot_asked=('(s.slot is not null)' if slotted else 'false'),
                                      recency=('r.recency' if current else '1'),
                                      asks_current=(('(a.asks_current and w.intent_id is null)' if timed
                                                     else 'a.asks_current') if current else 'false')), 'sql') }}
            as score
    from fused as f
    inner join scoped_memories as m using (memory_id)
    {% if lexical -%}
    inner join addressed as a on a.intent_id = f.intent_id
    {%- endif %}
    {% if timed -%}
    left join time_windows as w on w.intent_id = f.intent_id
    {%- endif %}
    {% if slotted -%}
    left join asked_slots as s on s.intent_id = f.intent_id and s.slot = m.slot
    {%- endif %}
    {% if current -%}
    inner join memory_recency as r on r.memory_id = f.memory_id
    {%- endif %}
    where f.similarity >= {{ min_sim }}
),

{% if lifted -%}
-- the conversation lift (recall_lift): the best score among the ranked memories said within
-- var conversation_lift_turns turns of each one in its session, itself included
neighbourhood as (
    select
        *,
        case when turn_session_id is null or turn_seq is null then score
            else max(score) over (
                partition by intent_id, turn_session_id order by turn_seq
                range between {{ lift_turns }} preceding and {{ lift_turns }} following
            ) end as best_near
    from kept
),

lifted as (
    select
        *,
        {{ recall_lift('score', 'best_near', 'sql') }} as final_score
    from neighbourhood
),
{%- else -%}
lifted as (
    select
        *,
        score as final_score
    from kept
),
{%- endif %}

ranked as (
    select
        *,
        row_number() over (partition by intent_id order by final_score desc, memory_id) as rank
    from lifted
)

select
    intent_id,
    rank,
    memory_id,
    kind,
    content,
    similarity,
    strength,
    final_score as score,
    source_message_ids,
    lexical_score,
    said_at,
    happened_on,
    happened_grain
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
    min_sim='$4::' ~ double_type(),
    kinds='$5::varchar[]',
    terms=ref('memory_term_index').include(database=False),
    term_stats=ref('memory_term_stats').include(database=False),
    agent_id='$7::varchar',
    session_id='$8::varchar',
    time_expressions=ref('time_expressions'),
    as_of=recall_as_of(),
    question_slots=ref('question_slots')
) }}
{%- endmacro %}

{#- The time a recall's "last week" is resolved against: var as_of when the build pins it (the
    benchmarks ask as of their conversations' end), else the clock at the request (UTC). -#}
{% macro recall_as_of() -%}
{%- set as_of = timestamp_var('as_of') -%}
{%- if as_of is none -%}
cast(current_timestamp at time zone 'UTC' as timestamp)
{%- else -%}
{{ sql_literal(as_of) }}::timestamp
{%- endif -%}
{%- endmacro %}

{#- The published time-scope pattern (recall_queries.time_scope_pattern): every time expression of
    relation time_expressions as one alternation, without word edges, so it matches wherever the
    statement's time_expression_match may (and some more): the serving index leaves a question it
    matches to the compiled statement. '' when the time scope is off (var time_scope_weight 1). -#}
{% macro time_scope_pattern(time_expressions) -%}
{%- if number_var('time_scope_weight') == 1 or not execute or load_relation(time_expressions) is none -%}
{{ return('') }}
{%- endif -%}
{%- set rows = run_query('select pattern from ' ~ time_expressions ~ ' order by pattern').rows -%}
{{ return('(?:' ~ (rows | map(attribute=0) | join('|')) ~ ')') }}
{%- endmacro %}

{#- The (slot, pattern) pairs of relation question_slots (a row's ‖-separated slots are several
    pairs), read at compile time: [] before the seed is loaded (compile-only runs). -#}
{% macro question_slot_pairs(question_slots) -%}
{%- if not execute or load_relation(question_slots) is none -%}
{{ return([]) }}
{%- endif -%}
{%- set rows = run_query('select question_slot_id, slots, pattern from ' ~ question_slots ~ ' order by question_slot_id').rows -%}
{%- set pairs = [] -%}
{%- for row in rows -%}
{%- for slot in row[1].split('‖') if slot | trim -%}
{%- do pairs.append((slot | trim, row[2])) -%}
{%- endfor -%}
{%- endfor -%}
{{ return(pairs) }}
{%- endmacro %}

{#- recall_sql's asked_slots: (intent_id, slot) for every slot a question of relation `queries`
    (intent_id, query_text) asks for, by the patterns of relation question_slots on the
    lower-cased text (each pattern a literal: compiled once). -#}
{% macro asked_slots_sql(queries, question_slots) -%}
{%- set pairs = question_slot_pairs(question_slots) -%}
{%- if pairs | length == 0 -%}
select null::integer as intent_id, null::varchar as slot where false
{%- else -%}
select distinct intent_id, slot
from (
    {%- for slot, pattern in pairs %}
    select intent_id, {{ sql_literal(slot) }}::varchar as slot from {{ queries }}
    where query_text is not null and {{ regexp_search('lower(query_text)', sql_literal(pattern)) }}
    {%- if not loop.last %}
    union all
    {%- endif %}
    {%- endfor %}
) as asked
{%- endif -%}
{%- endmacro %}

{#- The published slot questions (recall_queries.slot_questions): the (slot, pattern) pairs of
    relation question_slots as a JSON array of [slot, pattern], for the serving index, which
    weighs the asked slots as asked_slots does (recall_shim/serving/hybrid.py). '[]' when slot
    weighting is off (var slot_question_weight 1). -#}
{% macro slot_questions_json(question_slots) -%}
{%- if number_var('slot_question_weight') == 1 -%}
{{ return('[]') }}
{%- endif -%}
{{ return(tojson(question_slot_pairs(question_slots) | map('list') | list)) }}
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
