{#- The hot tail (docs/serving.md "Hot tail"): statements the build publishes in recall_queries so
    that the serving side makes memories of messages landed since the newest snapshot with the
    build's own SQL (the same macros the models use), without dbt. On DuckDB the shim runs them
    in an in-memory DuckDB over the landed rows it read (recall_shim/serving/tail.py); on
    PostgreSQL in the tail worker's own session, over temporary tables
    (recall_shim/targets/postgres/tail.py). -#}

{#- Creates a table of the statement's session: DuckDB's in-memory database, or a temporary table
    of PostgreSQL's session (replaced when it exists). -#}
{% macro tail_table(name) -%}
  {{ return(adapter.dispatch('tail_table')(name)) }}
{%- endmacro %}

{% macro default__tail_table(name) -%}
create or replace table {{ name }} as
{%- endmacro %}

{% macro postgres__tail_table(name) -%}
drop table if exists pg_temp.{{ name }}; create temporary table {{ name }} as
{%- endmacro %}

{#- A relation's rows inlined as a VALUES list (a published statement runs without the
    warehouse): columns is a list of (name, SQL type). Rendered at execution (run_query); no rows
    where the relation is not built (a compile-only run). -#}
{% macro inline_rows(relation, columns) -%}
{%- set names = columns | map(attribute=0) | list -%}
{#- compile-only runs (sqlfluff, dbt compile of an unbuilt store) have no seed table yet: no rows -#}
{%- set present = execute and load_relation(relation) is not none -%}
{%- set rows = run_query('select ' ~ names | join(', ') ~ ' from ' ~ relation ~ ' order by ' ~ names | join(', ')).rows
    if present else [] -%}
{%- if rows | length == 0 -%}
select {% for name, type in columns %}null::{{ type }} as {{ name }}{{ ', ' if not loop.last }}{% endfor %} where false
{%- else -%}
select {% for name, type in columns %}{{ name }}::{{ type }} as {{ name }}{{ ', ' if not loop.last }}{% endfor %}
from (values
{%- for row in rows %}
    ({% for v in row %}{% if v is none %}null{% elif v is sameas true %}true{% elif v is sameas false %}false{% elif v is number %}{{ v }}{% else %}{{ sql_literal(v | string) }}{% endif %}{{ ', ' if not loop.last }}{% endfor %}){{ ',' if not loop.last }}
{%- endfor %}
) as v ({{ names | join(', ') }})
{%- endif -%}
{%- endmacro %}

{#- The hot tail's seed tables (created once per snapshot in the shim's in-memory DuckDB): the
    rules' seeds the extraction reads, inlined at build time (the relations come from the model's
    refs: models/serving/recall_queries.sql). Statements separated by ';'. -#}
{% macro tail_seeds_sql(assistant_markers, clause_rules, extraction_rules, time_expressions) -%}
{{ tail_table('tail_markers') }}
{{ inline_rows(assistant_markers, [('pattern', 'varchar'), ('keep', 'boolean')]) }};
{{ tail_table('tail_clause_rules') }}
{{ inline_rows(clause_rules, [('clause_rule_id', 'varchar'), ('purpose', 'varchar'), ('step', 'integer'),
                                     ('pattern', 'varchar'), ('replacement', 'varchar')]) }};
{{ tail_table('tail_extraction_rules') }}
{{ inline_rows(extraction_rules, [('rule_id', 'varchar'), ('kind', 'varchar'), ('slot', 'varchar'),
                                         ('entity', 'varchar'), ('polarity', 'varchar'), ('list_item', 'varchar'),
                                         ('priority', 'integer'), ('pattern', 'varchar'), ('template', 'varchar')]) }};
{{ tail_table('tail_time_expressions') }}
{{ inline_rows(time_expressions, [('time_rule_id', 'varchar'), ('priority', 'integer'), ('pattern', 'varchar'),
                                         ('grain', 'varchar'), ('shift', 'integer'), ('weekday', 'integer'),
                                      ('month', 'integer')]) }}
{%- endmacro %}

{#- The accepted rows of relation tail_messages (session_log's columns, as landed), typed and
    checked like int_messages_validated (duplicate message ids aside: tail_memories_sql). -#}
{% macro tail_rows_sql() -%}
with typed as (
    select {{ typed_landed_columns('false') }}
    from tail_messages
),

checked as (
    select
        *,
        {{ landed_row_reject_reason() }} as reject_reason
    from typed
)

select landing_id, user_id, session_id, agent_id, msg_seq, role, content, message_at, message_id, landed_at,
    landing_file, landing_seq
from checked
where reject_reason is null
{%- endmacro %}

{#- The extractions of relation tail_new_rows (tail_rows_sql's rows): rule extractions like
    int_memories_extracted and episode / assistant memories like int_episodes_extracted, with
    the seed tables of tail_seeds_sql. Each row of a message is extracted once, when it arrives.
    clause_rules, extraction_rules, time_expressions: the seeds tail_seeds_sql copied (refs),
    whose patterns the statement holds as constants (macros/rule_patterns.sql). -#}
{% macro tail_extractions_sql(clause_rules=none, extraction_rules=none, time_expressions=none) -%}
{%- set assistant_roles = string_list_var('assistant_memory_roles') -%}
with tail_episode_messages as (
    select message_id, user_id, content, message_at, landed_at as loaded_at
    from tail_new_rows
    where role in ({{ sql_string_list(string_list_var('episode_roles')) }})
),

tail_assistant_messages as (
    select message_id, user_id, content, message_at, landed_at as loaded_at
    from tail_new_rows
    where {% if assistant_roles | length > 0 %}role in ({{ sql_string_list(assistant_roles) }}){% else %}false{% endif %}
),

tail_rule_messages as (
    select message_id, user_id, content, message_at, landed_at as loaded_at
    from tail_new_rows
    where role in ({{ sql_string_list(string_list_var('extract_roles')) }})
)

select message_id, user_id, kind, slot, content, happened_on, happened_grain, message_at, loaded_at
from ({{ rule_extractions('tail_rule_messages', 'tail_clause_rules', 'tail_extraction_rules',
                          'tail_time_expressions', seeds={'clause_rules': clause_rules,
                          'extraction_rules': extraction_rules, 'time_expressions': time_expressions}) }}) as r
union all
select message_id, user_id, kind, slot, content, null::date as happened_on, null::varchar as happened_grain,
    message_at, loaded_at
from ({{ episode_extractions('tail_episode_messages', 'tail_assistant_messages', 'tail_markers') }}) as e
{%- endmacro %}

{#- Memories of the tail, as a build would make them from these rows alone: relation tail_rows
    (tail_rows_sql's rows of the users asked for) and tail_extractions (tail_extractions_sql's rows
    of them). Of the rows of one (user_id, message_id) the first landed wins (as
    int_messages_validated; ids an earlier build accepted are not known here); identical
    normalised contents of one user and kind are one memory (memory_id as int_memory_candidates);
    strength is folded like int_memory_strength as of $1 (TIMESTAMP); happened_on / happened_grain
    are the first mention's (int_memory_candidates); provenance (session_ids, agent_ids) like
    int_memory_provenance. One row per candidate memory; consolidation is
    tail_merged_sql's, supersession runs at the build. -#}
{% macro tail_memories_sql() -%}
with accepted as (
    select *
    from (
        select
            *,
            row_number() over (
                partition by user_id, message_id order by landed_at, landing_file, landing_seq, landing_id
            ) as id_occurrence
        from tail_rows
    ) as c
    where id_occurrence = 1
),

extractions as (
    select e.*
    from tail_extractions as e
    inner join accepted as a
        on a.user_id = e.user_id and a.message_id = e.message_id and a.landed_at = e.loaded_at
),
candidates as (
    select
        {{ memory_id_key('user_id', 'kind', normalised_content('content')) }} as memory_id,
        user_id,
        kind,
        {{ first_agg('slot', 'message_at desc') }} as slot,
        {{ arg_min_agg('content', 'message_at') }} as content,
        {{ first_agg('happened_on', 'message_at') }} as happened_on,
        {{ first_agg('happened_grain', 'message_at') }} as happened_grain,
        {{ embedding_form_for_kind('kind') }} as embedding_form,
        min(message_at) as created_at,
        {{ list_agg('message_id', 'message_id', distinct=true) }} as source_message_ids,
        {{ list_agg('message_at', 'message_at') }} as mentioned_at
    from extractions
    group by user_id, kind, {{ normalised_content('content') }}
),

repeat_mentions as (
    select
        memory_id,
        unnest(mentioned_at[2:]) as event_at
    from candidates
),

gaps as (
    select
        e.memory_id,
        e.event_at,
        {{ days_between(
            'coalesce(lag(e.event_at) over (partition by e.memory_id order by e.event_at), c.created_at)',
            'e.event_at'
        ) }} as gap_days
    from repeat_mentions as e
    inner join candidates as c using (memory_id)
    where e.event_at <= $1::timestamp
),

folded as (
    select
        memory_id,
        {{ fold_strength(list_agg('gap_days', 'event_at')) }} as strength_at_last_event,
        max(event_at) as last_event_at
    from gaps
    group by memory_id
),

provenance as (
    select
        s.memory_id,
        coalesce(
            {{ list_agg('s.session_id', 's.session_id', distinct=true) }} filter (where s.session_id is not null),
            {{ text_list_literal('') }}
        ) as session_ids,
        coalesce(
            {{ list_agg('s.agent_id', 's.agent_id', distinct=true) }} filter (where s.agent_id is not null),
            {{ text_list_literal('') }}
        ) as agent_ids,
        max(case when s.source_rank = 1 then s.session_id end) as turn_session_id,
        max(case when s.source_rank = 1 then s.msg_seq end) as turn_seq
    from (
        select
            s.memory_id,
            a.session_id,
            a.agent_id,
            a.msg_seq,
            row_number() over (partition by s.memory_id order by a.message_at, a.message_id) as source_rank
        from (select memory_id, user_id, unnest(source_message_ids) as message_id from candidates) as s
        inner join accepted as a on a.user_id = s.user_id and a.message_id = s.message_id
    ) as s
    group by s.memory_id
)

{%- set computed = {
    'strength': decay_strength(
        'coalesce(f.strength_at_last_event, 1.0)',
        days_between('coalesce(f.last_event_at, c.created_at)', '$1::timestamp')),
    'is_question': '(' ~ is_question_memory('c.kind', 'c.content') ~ ')',
    'session_ids': 'p.session_ids',
    'agent_ids': 'p.agent_ids',
    'turn_session_id': 'p.turn_session_id',
    'turn_seq': 'p.turn_seq',
} %}
select
    {%- for name, type in tail_memory_columns() if name != 'embedding' %}
    {{ computed.get(name, 'c.' ~ name) }} as {{ name }},
    {%- endfor %}
    null::timestamp as valid_to,
    c.embedding_form
from candidates as c
left join folded as f using (memory_id)
left join provenance as p using (memory_id)
order by c.user_id, c.memory_id
{%- endmacro %}

{#- memory_term_index's rows of relation tail_memory_rows (memory_id, user_id, content). -#}
{% macro tail_terms_sql() -%}
select memory_id, user_id, term, tf, doc_len
from ({{ memory_term_rows('(select memory_id, user_id, content, null::timestamp as consolidated_at from tail_memory_rows)') }}) as t
{%- endmacro %}

{#- memory_term_stats' rows over relation tail_term_rows: every memory_term_index row (memory_id,
    user_id, term, doc_len) of the users the tail holds memories of, the snapshot's and the
    tail's, so BM25's statistics are those the next build computes. -#}
{% macro tail_term_stats_sql() -%}
select user_id, term, df, n_docs, avg_doc_len
from ({{ memory_term_stats_rows('tail_term_rows', 'null::timestamp') }}) as s
{%- endmacro %}

{#- The tail's candidates that the build folds into another memory (int_memories_consolidated's
    rule: a candidate that is not an episode joins an earlier candidate of its user and kind it is
    as close to as var consolidation_min_sim, unless either states a slot value): memory_ids of
    relation tail_candidates (memory_id, user_id, kind, slot, created_at, embedding) close to a
    current memory of relation tail_prior_memories (the snapshot's memories of the same users:
    user_id, kind, slot, embedding) or to an earlier tail candidate. -#}
{% macro tail_merged_sql() -%}
select t.memory_id
from tail_candidates as t
where t.kind != 'episode'
    and (
        exists (
            select 1 from tail_prior_memories as o
            where o.user_id = t.user_id and o.kind = t.kind and {{ same_thing('t', 'o') }}
                and {{ vector_cosine('t.embedding', 'o.embedding') }} >= {{ number_var('consolidation_min_sim') }}
        )
        or exists (
            select 1 from tail_candidates as o
            where o.user_id = t.user_id and o.kind = t.kind and o.memory_id != t.memory_id and {{ same_thing('t', 'o') }}
                and (o.created_at, o.memory_id) < (t.created_at, t.memory_id)
                and {{ vector_cosine('t.embedding', 'o.embedding') }} >= {{ number_var('consolidation_min_sim') }}
        )
    )
{%- endmacro %}

{#- PostgreSQL's recall over the live tables plus one user's tail (recall_shim/targets/postgres/tail.py):
    the shim's compiled recall statement (recall_sql, the one definition of the score) with the
    memories, the term rows and the term statistics of the user over both. Parameters as the
    recall statement's ($1..$8), then $9 the user's tail memories (jsonb array of objects with
    long_term_memory's recall columns, the embedding as pgvector text), $10 their term rows
    (jsonb: memory_id, user_id, term, tf, doc_len) and $11 the store generation the tail was made
    against. The tail counts only while the store's generation is still $11 (a build or a
    forget since then moved it: the live tables answer alone until the worker caught up), and a
    tail memory whose memory_id the live table already holds is left out (a build that folded it
    in, committed in between): never the same memory twice. The user's BM25 statistics are
    memory_term_stats_rows over the user's index rows and the tail's (those the next build
    computes). -#}
{#- The recall columns a tail memory carries (name, PostgreSQL type), the one list of them:
    tail_memories_sql selects them (plus valid_to, always null in the tail, and the embedding
    form the tail needs itself; slot weighs slot questions, recall_sql's asked_slots), the PostgreSQL tail sends each memory's row as JSONB
    (recall_shim/targets/postgres/tail.py: every column the statement returned, the embedding as
    pgvector text) and shim_recall_tail_sql reads these columns back, beside the live table's. -#}
{% macro tail_memory_columns() -%}
{{ return([
    ('memory_id', 'text'), ('user_id', 'text'), ('kind', 'text'), ('content', 'text'), ('embedding', 'embedding'),
    ('created_at', 'timestamp'), ('happened_on', 'date'), ('happened_grain', 'text'),
    ('source_message_ids', 'text[]'), ('strength', 'double precision'), ('is_question', 'boolean'),
    ('session_ids', 'text[]'), ('agent_ids', 'text[]'), ('turn_session_id', 'text'), ('turn_seq', 'bigint'),
    ('slot', 'text'),
]) }}
{%- endmacro %}

{% macro shim_recall_tail_sql(long_term_memory, memory_term_index, time_expressions, question_slots=none) -%}
{%- set ltm = long_term_memory.include(database=False) -%}
{%- set index = memory_term_index.include(database=False) -%}
{%- set generation = long_term_memory.include(database=False, identifier=False) ~ '.store_generation' -%}
{%- set emb = embedding_type() -%}
{%- set tail_counts -%}
(select generation from {{ generation }} where id = 1) = $11::bigint
{%- endset -%}
{%- set columns = tail_memory_columns() -%}
{%- set memories -%}
(
    select
        {%- for name, type in columns %}
        {{ name }}::{{ emb if type == 'embedding' else type }} as {{ name }},
        {%- endfor %}
        valid_to::timestamp as valid_to
    from {{ ltm }}
    where user_id = $1::varchar
    union all
    select
        {%- for name, type in columns %}
        t.{{ name }}{{ '::' ~ emb if type == 'embedding' }},
        {%- endfor %}
        null::timestamp
    from jsonb_to_recordset($9::jsonb) as t (
        {%- for name, type in columns %}
        {{ name }} {{ 'text' if type == 'embedding' else type }}{{ ',' if not loop.last }}
        {%- endfor %}
    )
    where t.user_id = $1::varchar
        and {{ tail_counts }}
        and not exists (select 1 from {{ ltm }} as h where h.user_id = t.user_id and h.memory_id = t.memory_id)
) as memories_with_tail
{%- endset -%}
{%- set terms -%}
(
    select memory_id::text as memory_id, user_id::text as user_id, term::text as term, tf::bigint as tf,
        doc_len::bigint as doc_len
    from {{ index }}
    where user_id = $1::varchar
    union all
    select t.memory_id, t.user_id, t.term, t.tf, t.doc_len
    from jsonb_to_recordset($10::jsonb) as t (memory_id text, user_id text, term text, tf bigint, doc_len bigint)
    where t.user_id = $1::varchar
        and {{ tail_counts }}
        and not exists (select 1 from {{ ltm }} as h where h.user_id = t.user_id and h.memory_id = t.memory_id)
)
{%- endset -%}
{{ recall_sql(
    memories=memories,
    queries="select generate_subscripts($2::" ~ emb ~ "[], 1) as intent_id, unnest($2::" ~ emb ~ "[]) as embedding, unnest($6::varchar[]) as query_text",
    user_id='$1::varchar',
    top_k='$3::integer',
    min_sim='$4::' ~ double_type(),
    kinds='$5::varchar[]',
    terms=terms,
    term_stats='(select user_id, term, df, n_docs, avg_doc_len from ('
        ~ memory_term_stats_rows(terms ~ ' as tail_index_rows', 'null::timestamp') ~ ') as tail_stats)',
    agent_id='$7::varchar',
    session_id='$8::varchar',
    time_expressions=time_expressions,
    as_of=recall_as_of(),
    question_slots=question_slots
) }}
{%- endmacro %}
