{#- One row per compiled statement the shim runs (query_name). The shim binds parameters at
    request time (no dbt, no Jinja per request); publishing copies this table into every serving
    snapshot, so a snapshot always carries the statements and settings it was built with. -#}
{%- set statements = [
    ('recall', shim_recall_sql(),
     '$1 user_id VARCHAR, $2 query vectors FLOAT[dim][], $3 top_k INTEGER, $4 min_sim DOUBLE, $5 kinds VARCHAR[] or NULL, $6 query texts VARCHAR[], $7 agent_id VARCHAR or NULL, $8 session_id VARCHAR or NULL'),
    ('similarity_distribution', shim_similarity_sql(),
     '$1 user_id VARCHAR, $2 query vectors FLOAT[dim][]'),
    ('lexical', shim_lexical_sql(),
     '$1 user_id VARCHAR, $2 query texts VARCHAR[]'),
    ('tokenize', 'select ' ~ tokenize('$1::varchar') ~ ' as terms',
     '$1 text VARCHAR'),
] -%}
{#- the turn context's links (macros/turn_context.sql) for the serving index and the hot tail (DuckDB) -#}
{%- if target.type != 'postgres' -%}
{%- do statements.append(('turn_links', turn_links_sql('long_term_memory'),
    'every current memory of relation long_term_memory: user_id, memory_id, neighbour_id, weight, id64, neighbour_id64')) -%}
{%- endif -%}
{#- the hot tail's statements (macros/tail.sql, docs/serving.md "Hot tail"), both targets -#}
{%- if bool_var('hot_tail') -%}
{%- do statements.extend([
    ('tail_seeds', tail_seeds_sql(ref('assistant_markers'), ref('clause_rules'), ref('extraction_rules'),
                                  ref('time_expressions')), 'creates the seed tables the tail extraction reads'),
    ('tail_rows', tail_rows_sql(), 'reads relation tail_messages (session_log columns as landed)'),
    ('tail_extractions', tail_extractions_sql(ref('clause_rules'), ref('extraction_rules'), ref('time_expressions')),
     'reads relation tail_new_rows (tail_rows rows) and the seed tables'),
    ('tail_memories', tail_memories_sql(), '$1 as_of TIMESTAMP; reads relations tail_rows and tail_extractions'),
    ('tail_terms', tail_terms_sql(), 'reads relation tail_memory_rows (memory_id, user_id, content)'),
    ('tail_term_stats', tail_term_stats_sql(), 'reads relation tail_term_rows (memory_term_index rows of the tail users)'),
    ('tail_merged', tail_merged_sql(), 'reads relations tail_candidates and tail_prior_memories'),
]) -%}
{%- endif -%}
{#- PostgreSQL's recall over the live tables plus a user's tail (macros/tail.sql) -#}
{%- if bool_var('hot_tail') and target.type == 'postgres' -%}
{%- do statements.append(('recall_tail', shim_recall_tail_sql(ref('long_term_memory'), ref('memory_term_index'),
                                                       ref('time_expressions'), ref('question_slots')),
    'as recall, then $9 tail memories JSONB, $10 their term rows JSONB, $11 the store generation')) -%}
{%- endif -%}

{#- the recall score rendered for numpy (macros/recall.sql recall_formula_numpy): the serving index
    and the PostgreSQL HNSW path evaluate these, so the score is written once -#}
{%- set formula = recall_formula_numpy() -%}

{#- questions about the current state (macros/recall.sql recall_factor): '' when the weight is off -#}
{%- set current_on = number_var('current_question_weight') != 1 -%}
{%- set current_pattern = string_var('current_question_pattern') if current_on else '' -%}

{%- set stopwords_sql = 'array[' ~ sql_string_list(string_list_var('lexical_stopwords')) ~ ']' -%}

{% for name, sql_text, parameters in statements %}
    select
        {{ sql_literal(name) }} as query_name,
        {{ sql_literal(sql_text) }} as sql_text,
        {{ sql_literal(parameters) }} as parameters,
        {{ sql_literal(choice_var('fusion_method')) }} as fusion_method,
        {{ number_var('strength_weight') }}::{{ double_type() }} as strength_weight,
        {{ number_var('question_episode_weight') }}::{{ double_type() }} as question_episode_weight,
        {{ number_var('assistant_memory_weight') }}::{{ double_type() }} as assistant_memory_weight,
        {{ sql_literal(string_var('assistant_question_pattern')) }}::varchar as assistant_question_pattern,
        {{ number_var('time_scope_weight') }}::{{ double_type() }} as time_scope_weight,
        {{ sql_literal(time_scope_pattern(ref('time_expressions'))) }}::varchar as time_scope_pattern,
        {{ number_var('slot_question_weight') }}::{{ double_type() }} as slot_question_weight,
        {{ sql_literal(slot_questions_json(ref('question_slots'))) }}::varchar as slot_questions,
        {{ number_var('current_question_weight') }}::{{ double_type() }} as current_question_weight,
        {{ sql_literal(current_pattern) }}::varchar as current_question_pattern,
        {{ number_var('fusion_vector_weight') }}::{{ double_type() }} as fusion_vector_weight,
        {{ number_var('lexical_saturation') }}::{{ double_type() }} as lexical_saturation,
        {{ number_var('lexical_context_prev_weight') }}::{{ double_type() }} as lexical_context_prev_weight,
        {{ number_var('lexical_context_next_weight') }}::{{ double_type() }} as lexical_context_next_weight,
        {{ number_var('fusion_rrf_k') }}::{{ double_type() }} as fusion_rrf_k,
        {{ sql_literal(formula.relevance) }} as relevance_numpy,
        {{ sql_literal(formula.factor) }} as factor_numpy,
        {{ sql_literal(formula.score) }} as score_numpy,
        {{ sql_literal(formula.lift) }} as lift_numpy,
        {{ number_var('conversation_lift_weight') }}::{{ double_type() }} as conversation_lift_weight,
        {{ number_var('conversation_lift_turns') }} as conversation_lift_turns,
        {{ 'true' if bool_var('recall_episodes_by_default') else 'false' }} as recall_episodes_by_default,
        {{ number_var('lexical_k1') }}::{{ double_type() }} as lexical_k1,
        {{ number_var('lexical_b') }}::{{ double_type() }} as lexical_b,
        {{ stopwords_sql }}::varchar[] as lexical_stopwords,
        {{ sql_literal(string_var('embedding_model')) }} as embedding_model,
        {{ number_var('embedding_dim') }} as embedding_dim,
        {{ sql_literal(choice_var('embedding_query_form')) }} as embedding_query_form,
        {{ number_var('recall_top_k') }} as default_top_k,
        {{ number_var('recall_min_sim') }}::{{ double_type() }} as default_min_sim,
        {{ number_var('recall_max_top_k') }} as max_top_k,
        {{ number_var('recall_max_query_chars') }} as max_query_chars,
        {{ as_of_timestamp() }} as built_at
    {% if not loop.last %}union all{% endif %}
{% endfor %}
