{#- Small SQL pieces that differ between the targets (docs/scaling_out.md). Each dispatches to
    duckdb__<name> (today's DuckDB SQL) or postgres__<name> (PostgreSQL 16 + pgvector). -#}

{#- The raw rows writers landed in one landing source table, with a _landing_file column.
    landing: source('landing', <table>) (models/staging/landing/_landing__sources.yml), called in
    the model so that the DAG shows it; columns: {name: DuckDB type} of the landing schema;
    relation: the incremental model itself (only files it has not loaded are read) or none.
    DuckDB: the immutable JSONL files of the table's folder <store>.inbox/<table>/ (paths quoted by
    sql_literal/glob_escape, macros/store_paths.sql); PostgreSQL: the source relation, the landing
    table in the target schema that writers INSERT into through ordinary transactions
    (recall_shim/targets/postgres/server.py reads their identifiers from the sources file); the model's own anti-join skips rows it already loaded. -#}
{% macro landing_rows(landing, columns, relation=none) -%}
  {{ return(adapter.dispatch('landing_rows')(landing, columns, relation)) }}
{%- endmacro %}

{% macro duckdb__landing_rows(landing, columns, relation=none) -%}
{%- set folder = landing_folder(landing) -%}
{{ read_landing(folder, columns, new_landing_files(folder, relation) if relation is not none else none) }}
{%- endmacro %}

{% macro postgres__landing_rows(landing, columns, relation=none) -%}
{{ landing }}
{%- endmacro %}

{#- The DuckDB landing folder of a landing source relation: var store_layout's name for its table
    in the 'landing' source (the relation itself carries only the PostgreSQL identifier). -#}
{% macro landing_folder(landing) -%}
  {%- if execute -%}
    {%- for node in graph.sources.values()
        if node.package_name == project_name and node.source_name == 'landing'
        and node.identifier == landing.identifier -%}
      {{ return(store_layout(node.name)) }}
    {%- endfor -%}
    {{ exceptions.raise_compiler_error('not a landing source table: ' ~ landing) }}
  {%- endif -%}
  {{ return(landing.identifier) }}
{%- endmacro %}

{#- Freshness of a landing source table (its loaded_at_query): the newest landed_at. -#}
{% macro landing_loaded_at(landing) -%}
select max({{ try_cast_text('landed_at', 'timestamptz') }}) from {{ landing_rows(landing, {'landed_at': 'VARCHAR'}) }} as landed
{%- endmacro %}

{#- expr cast to type, or NULL when the text is not a valid value of type. -#}
{% macro try_cast_text(expr, type) -%}
  {{ return(adapter.dispatch('try_cast_text')(expr, type)) }}
{%- endmacro %}

{% macro duckdb__try_cast_text(expr, type) -%}
try_cast({{ expr }} as {{ type }})
{%- endmacro %}

{% macro postgres__try_cast_text(expr, type) -%}
case when pg_input_is_valid({{ expr }}, '{{ type }}') then ({{ expr }})::{{ type }} end
{%- endmacro %}

{#- Whether the whole of text_expr matches the regular expression pattern_expr. -#}
{% macro regexp_full_match(text_expr, pattern_expr) -%}
  {{ return(adapter.dispatch('regexp_full_match')(text_expr, pattern_expr)) }}
{%- endmacro %}

{% macro duckdb__regexp_full_match(text_expr, pattern_expr) -%}
regexp_full_match({{ text_expr }}, {{ pattern_expr }})
{%- endmacro %}

{#- PostgreSQL takes embedded options such as (?i) only at the start of a pattern. -#}
{% macro postgres__regexp_full_match(text_expr, pattern_expr) -%}
(case
    when left({{ pattern_expr }}, 4) = '(?i)' then {{ text_expr }} ~* ('^(?:' || substr({{ pg_regex(pattern_expr) }}, 5) || ')$')
    else {{ text_expr }} ~ ('^(?:' || {{ pg_regex(pattern_expr) }} || ')$')
end)
{%- endmacro %}

{#- FROM items pairing every row of rules_rel (alias r) with the rows of rows_rel (alias c) that
    satisfy condition, where condition matches a row's text against the rule's pattern column.
    PostgreSQL compiles a pattern that is not a constant at each use and keeps only the last 32
    in a cache: a join that tries every rule against one row, then every rule against the next
    (its usual nested loop with the rules inside) compiles every pattern again for every row (11-19
    ms per message with ~170 rule and time patterns). So on PostgreSQL the rules are the outer
    side of a LATERAL subquery (OFFSET 0 keeps the planner from flattening it): each pattern is
    compiled once and tried against every row. rows_rel should be a materialized CTE
    (cte_materialized) so it is not recomputed per rule. DuckDB (RE2, patterns compiled per
    distinct value) keeps the plain join. Same rows on both. -#}
{% macro rule_major_join(rules_rel, r, rows_rel, c, condition) -%}
  {{ return(adapter.dispatch('rule_major_join')(rules_rel, r, rows_rel, c, condition)) }}
{%- endmacro %}

{% macro duckdb__rule_major_join(rules_rel, r, rows_rel, c, condition) -%}
{{ rows_rel }} as {{ c }}
inner join {{ rules_rel }} as {{ r }} on ({{ condition }})
{%- endmacro %}

{% macro postgres__rule_major_join(rules_rel, r, rows_rel, c, condition) -%}
{{ rules_rel }} as {{ r }}
cross join lateral (
    select * from {{ rows_rel }} as {{ c }}
    where ({{ condition }})
    offset 0
) as {{ c }}
{%- endmacro %}

{#- The keyword that makes a CTE computed once (PostgreSQL inlines a CTE used once; the
    rule_major_join above would then recompute it per rule). Empty on DuckDB. -#}
{% macro cte_materialized() -%}
  {{ return(adapter.dispatch('cte_materialized')()) }}
{%- endmacro %}

{% macro duckdb__cte_materialized() -%}{%- endmacro %}

{% macro postgres__cte_materialized() -%}materialized{%- endmacro %}

{#- A DuckDB (RE2) pattern literal rewritten for PostgreSQL's regex engine, which has no Unicode
    classes: \pZ (Unicode separators) becomes the list of those code points, and \x00 becomes
    \x01 (PostgreSQL text cannot hold NUL, so nothing is lost). -#}
{% macro pg_regex(pattern_expr) -%}
{{ pattern_expr
   | replace('\\pZ', '\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000')
   | replace('\\x00', '\\x01') }}
{%- endmacro %}

{#- An interval of n_expr minutes. -#}
{% macro minutes_interval(n_expr) -%}
  {{ return(adapter.dispatch('minutes_interval')(n_expr)) }}
{%- endmacro %}

{% macro duckdb__minutes_interval(n_expr) -%}
to_minutes({{ n_expr }}::bigint)
{%- endmacro %}

{% macro postgres__minutes_interval(n_expr) -%}
make_interval(mins => {{ n_expr }})
{%- endmacro %}

{#- An interval of n_expr days. -#}
{% macro days_interval(n_expr) -%}
  {{ return(adapter.dispatch('days_interval')(n_expr)) }}
{%- endmacro %}

{% macro duckdb__days_interval(n_expr) -%}
to_days({{ n_expr }}::bigint)
{%- endmacro %}

{% macro postgres__days_interval(n_expr) -%}
make_interval(days => {{ n_expr }})
{%- endmacro %}

{#- Cosine similarity of two embeddings (NULL when either is NULL). -#}
{% macro cosine_similarity(a, b, dim=none) -%}
  {{ return(adapter.dispatch('cosine_similarity')(a, b, dim)) }}
{%- endmacro %}

{% macro duckdb__cosine_similarity(a, b, dim=none) -%}
array_cosine_similarity({{ a }}::{{ embedding_type(dim) }}, {{ b }}::{{ embedding_type(dim) }})
{%- endmacro %}

{#- pgvector's <=> is cosine distance; 1 - distance is the similarity. -#}
{% macro postgres__cosine_similarity(a, b, dim=none) -%}
(1 - ({{ a }}::{{ embedding_type(dim) }} <=> {{ b }}::{{ embedding_type(dim) }}))
{%- endmacro %}

{#- Cosine similarity of two columns already of the embedding type (no casts). -#}
{% macro vector_cosine(a, b) -%}
  {{ return(adapter.dispatch('vector_cosine')(a, b)) }}
{%- endmacro %}

{% macro duckdb__vector_cosine(a, b) -%}
array_cosine_similarity({{ a }}, {{ b }})
{%- endmacro %}

{% macro postgres__vector_cosine(a, b) -%}
(1 - ({{ a }} <=> {{ b }}))
{%- endmacro %}

{#- The 64-bit float type name. -#}
{% macro double_type() -%}
  {{ return(adapter.dispatch('double_type')()) }}
{%- endmacro %}

{% macro duckdb__double_type() -%}double{%- endmacro %}

{% macro postgres__double_type() -%}double precision{%- endmacro %}

{#- Seconds since the Unix epoch of a timestamp. -#}
{% macro epoch_seconds(ts_expr) -%}
  {{ return(adapter.dispatch('epoch_seconds')(ts_expr)) }}
{%- endmacro %}

{% macro duckdb__epoch_seconds(ts_expr) -%}
epoch({{ ts_expr }})
{%- endmacro %}

{% macro postgres__epoch_seconds(ts_expr) -%}
extract(epoch from {{ ts_expr }})
{%- endmacro %}

{#- Number of elements of a list (DuckDB) / array (PostgreSQL). -#}
{% macro list_length(list_expr) -%}
  {{ return(adapter.dispatch('list_length')(list_expr)) }}
{%- endmacro %}

{% macro duckdb__list_length(list_expr) -%}
len({{ list_expr }})
{%- endmacro %}

{% macro postgres__list_length(list_expr) -%}
cardinality({{ list_expr }})
{%- endmacro %}

{#- Whether a list contains a value. -#}
{% macro list_has(list_expr, value_expr) -%}
  {{ return(adapter.dispatch('list_has')(list_expr, value_expr)) }}
{%- endmacro %}

{% macro duckdb__list_has(list_expr, value_expr) -%}
list_contains({{ list_expr }}, {{ value_expr }})
{%- endmacro %}

{% macro postgres__list_has(list_expr, value_expr) -%}
({{ value_expr }} = any({{ list_expr }}))
{%- endmacro %}

{#- Whether a float is NaN. -#}
{% macro is_nan(expr) -%}
  {{ return(adapter.dispatch('is_nan')(expr)) }}
{%- endmacro %}

{% macro duckdb__is_nan(expr) -%}
isnan({{ expr }})
{%- endmacro %}

{% macro postgres__is_nan(expr) -%}
({{ expr }} = 'NaN'::float8)
{%- endmacro %}

{#- The first year 1900-2099 written in a text (digits not part of a longer number), as an
    integer; NULL when there is none or text_expr is 'null'. -#}
{% macro year_in_text(text_expr) -%}
{%- if text_expr == 'null' -%}
cast(null as integer)
{%- else -%}
{{ return(adapter.dispatch('year_in_text')(text_expr)) }}
{%- endif -%}
{%- endmacro %}

{% macro duckdb__year_in_text(text_expr) -%}
try_cast(nullif(regexp_extract({{ text_expr }}, '(?:^|[^0-9])((?:19|20)[0-9]{2})(?:[^0-9]|$)', 1), '') as integer)
{%- endmacro %}

{% macro postgres__year_in_text(text_expr) -%}
cast(substring({{ text_expr }} from '(?:^|[^0-9])((?:19|20)[0-9]{2})(?:[^0-9]|$)') as integer)
{%- endmacro %}

{#- Whether the regular expression matches somewhere in the text. -#}
{% macro regexp_search(text_expr, pattern_expr) -%}
  {{ return(adapter.dispatch('regexp_search')(text_expr, pattern_expr)) }}
{%- endmacro %}

{% macro duckdb__regexp_search(text_expr, pattern_expr) -%}
regexp_matches({{ text_expr }}, {{ pattern_expr }})
{%- endmacro %}

{% macro postgres__regexp_search(text_expr, pattern_expr) -%}
({{ text_expr }} ~ {{ pg_regex(pattern_expr) }})
{%- endmacro %}

{#- Aggregate: the first non-NULL expr in order_by order. -#}
{% macro first_agg(expr, order_by) -%}
  {{ return(adapter.dispatch('first_agg')(expr, order_by)) }}
{%- endmacro %}

{% macro duckdb__first_agg(expr, order_by) -%}
any_value({{ expr }} order by {{ order_by }})
{%- endmacro %}

{% macro postgres__first_agg(expr, order_by) -%}
(array_agg({{ expr }} order by {{ order_by }}) filter (where {{ expr }} is not null))[1]
{%- endmacro %}

{#- Aggregate: expr of the row with the smallest key. -#}
{% macro arg_min_agg(expr, key) -%}
  {{ return(adapter.dispatch('arg_min_agg')(expr, key)) }}
{%- endmacro %}

{% macro duckdb__arg_min_agg(expr, key) -%}
arg_min({{ expr }}, {{ key }})
{%- endmacro %}

{% macro postgres__arg_min_agg(expr, key) -%}
(array_agg({{ expr }} order by {{ key }}) filter (where {{ key }} is not null))[1]
{%- endmacro %}

{#- Aggregate: the values as a list in order_by order (distinct: without repeats). -#}
{% macro list_agg(expr, order_by, distinct=false) -%}
  {{ return(adapter.dispatch('list_agg')(expr, order_by, distinct)) }}
{%- endmacro %}

{% macro duckdb__list_agg(expr, order_by, distinct=false) -%}
list({{ 'distinct ' if distinct }}{{ expr }} order by {{ order_by }})
{%- endmacro %}

{% macro postgres__list_agg(expr, order_by, distinct=false) -%}
array_agg({{ 'distinct ' if distinct }}{{ expr }} order by {{ order_by }})
{%- endmacro %}

{#- Aggregate: the elements of a list column over all rows, sorted (distinct: without repeats). -#}
{% macro flatten_agg(list_expr, distinct=false) -%}
  {{ return(adapter.dispatch('flatten_agg')(list_expr, distinct)) }}
{%- endmacro %}

{% macro duckdb__flatten_agg(list_expr, distinct=false) -%}
{%- if distinct -%}
list_sort(list_distinct(flatten(list({{ list_expr }}))))
{%- else -%}
list_sort(flatten(list({{ list_expr }})))
{%- endif -%}
{%- endmacro %}

{#- array_cat_agg is created by prepare_target (on-run-start). -#}
{% macro postgres__flatten_agg(list_expr, distinct=false) -%}
array(select {{ 'distinct ' if distinct }}e from unnest({{ target.schema }}.array_cat_agg({{ list_expr }})) as e order by e)
{%- endmacro %}

{#- round to n decimal places, as a double. -#}
{% macro round_places(expr, n) -%}
  {{ return(adapter.dispatch('round_places')(expr, n)) }}
{%- endmacro %}

{% macro duckdb__round_places(expr, n) -%}
round({{ expr }}, {{ n }})
{%- endmacro %}

{% macro postgres__round_places(expr, n) -%}
round(({{ expr }})::numeric, {{ n }})::double precision
{%- endmacro %}

{#- on-run-start: objects the models need that SQL alone cannot express inline. DuckDB: none.
    PostgreSQL: the pgvector extension, the schema, array_cat_agg, fold_strength_gaps (the
    decay/reinforce fold of macros/strength.sql as a plpgsql loop) and embed() (a lookup in the
    embedding_cache the shim fills, recall_shim/_pg_build.py). -#}
{% macro prepare_target() -%}
  {{ return(adapter.dispatch('prepare_target')()) }}
{%- endmacro %}

{% macro duckdb__prepare_target() -%}
select 1
{%- endmacro %}

{% macro postgres__prepare_target() -%}
{%- set s = target.schema -%}
create extension if not exists vector;
create schema if not exists {{ s }};
create or replace aggregate {{ s }}.array_cat_agg(anycompatiblearray) (
    sfunc = array_cat, stype = anycompatiblearray, initcond = '{}'
);
create or replace function {{ s }}.fold_strength_gaps(
    gaps double precision[], rate double precision, floor double precision, step double precision
) returns double precision language plpgsql immutable as $fold$
declare
    s double precision := 1.0;
    gap double precision;
begin
    foreach gap in array coalesce(gaps, '{}') loop
        s := {{ reinforce_strength(decay_strength('s', 'gap', 'rate', 'floor'), 'step', 'floor') }};
    end loop;
    return s;
end
$fold$;
create table if not exists {{ s }}.embedding_cache (
    embedding_key text primary key,
    embedding_model text not null,
    embedding_form text not null,
    embedding {{ embedding_type() }} not null,
    embedded_at timestamp not null
);
create or replace function {{ s }}.embed(content text, model text, form text)
returns {{ embedding_type() }} language sql stable as $embed$
    select c.embedding from {{ s }}.embedding_cache as c
    where c.embedding_key = md5(concat_ws('|', model, form, content))
$embed$
{%- endmacro %}

{#- Literals for tests and seeds. values: the numbers as SQL text ('0.9, 0.1'). -#}
{% macro vector_literal(values, dim) -%}
  {{ return(adapter.dispatch('vector_literal')(values, dim)) }}
{%- endmacro %}

{% macro duckdb__vector_literal(values, dim) -%}
[{{ values }}]::float[{{ dim }}]
{%- endmacro %}

{% macro postgres__vector_literal(values, dim) -%}
'[{{ values }}]'::vector({{ dim }})
{%- endmacro %}

{#- A list of doubles; values: SQL text of the numbers, '' for an empty list. -#}
{% macro double_list_literal(values) -%}
  {{ return(adapter.dispatch('double_list_literal')(values)) }}
{%- endmacro %}

{% macro duckdb__double_list_literal(values) -%}
{%- if values -%}[{{ values }}]{%- else -%}[]::double[]{%- endif -%}
{%- endmacro %}

{% macro postgres__double_list_literal(values) -%}
array[{{ values }}]::double precision[]
{%- endmacro %}

{#- A list of string literals; values: SQL text ("'a', 'b'"). -#}
{% macro text_list_literal(values) -%}
  {{ return(adapter.dispatch('text_list_literal')(values)) }}
{%- endmacro %}

{% macro duckdb__text_list_literal(values) -%}
[{{ values }}]::varchar[]
{%- endmacro %}

{% macro postgres__text_list_literal(values) -%}
array[{{ values }}]::text[]
{%- endmacro %}

{#- Two lists as one, sorted (distinct: without repeats): an incremental build folds a row's new
    list values into its stored ones, as flatten_agg orders them in a full build. -#}
{% macro list_merge_sorted(a, b, distinct=false) -%}
  {{ return(adapter.dispatch('list_merge_sorted')(a, b, distinct)) }}
{%- endmacro %}

{% macro duckdb__list_merge_sorted(a, b, distinct=false) -%}
{%- if distinct -%}
list_sort(list_distinct(list_concat({{ a }}, {{ b }})))
{%- else -%}
list_sort(list_concat({{ a }}, {{ b }}))
{%- endif -%}
{%- endmacro %}

{% macro postgres__list_merge_sorted(a, b, distinct=false) -%}
array(select {{ 'distinct ' if distinct }}e from unnest({{ a }} || {{ b }}) as e order by e)
{%- endmacro %}

{#- Indexes of an incrementally loaded model (dbt's `indexes` config): PostgreSQL creates them once,
    when the table is created (first build or --full-refresh), and maintains them on every insert,
    update and delete after that; the incremental filters (max(loaded_at) of the model itself, key
    lookups of delete+insert and merges) use them instead of reading the whole table. DuckDB: none
    (its min/max zone maps serve the same filters). columns: a list of column lists. -#}
{% macro lookup_indexes(columns) -%}
  {%- if target.type != 'postgres' -%}{{ return([]) }}{%- endif -%}
  {%- set out = [] -%}
  {%- for cols in columns -%}
    {%- do out.append({'columns': cols}) -%}
  {%- endfor -%}
  {{ return(out) }}
{%- endmacro %}

{#- The HNSW index (cosine) on long_term_memory's embedding, a post-hook of the model (dbt's
    `indexes` config cannot pass WITH (m, ef_construction)). PostgreSQL: one DO block that
    creates <table>_embedding_hnsw_m<M>_ef<EF> with m and ef_construction from the vars
    recall_index_hnsw_m and recall_index_hnsw_ef_construction, if it does not exist yet: built
    once, then maintained on insert and update (pgvector's HNSW accepts inserts; deleted rows are
    skipped at query time and cleaned by VACUUM). Before that it drops every OTHER hnsw index of
    the table (a var change rebuilds the index once; the same vars keep the same index), and an
    index of the same name on another table of the schema: a --full-refresh renames the old table
    to dbt's backup relation, which keeps its index name until dbt drops it after the commit.
    Index names are schema-scoped, so the look-ups are by name within this schema. The values are
    checked vars only (integers; ef_construction >= 2 x m, as pgvector requires).
    docs/scaling_out.md says why 96 and when to rebuild. DuckDB: nothing. -#}
{% macro vector_index_hook() -%}
  {%- if target.type != 'postgres' -%}{{ return('') }}{%- endif -%}
  {%- set m = number_var('recall_index_hnsw_m') | int -%}
  {%- set ef = number_var('recall_index_hnsw_ef_construction') | int -%}
  {%- if ef < 2 * m -%}
    {{ exceptions.raise_compiler_error('var recall_index_hnsw_ef_construction (' ~ ef ~ ') must be at least twice'
        ~ ' recall_index_hnsw_m (' ~ m ~ '): pgvector requires ef_construction >= 2 * m') }}
  {%- endif -%}
  {%- set name = this.identifier ~ '_embedding_hnsw_m' ~ m ~ '_ef' ~ ef -%}
  {%- if name | length > 63 -%}
    {{ exceptions.raise_compiler_error('vector_index_hook: the index name ' ~ name ~ ' is longer than 63 characters') }}
  {%- endif -%}
  {%- set table = sql_literal(this.include(database=false) | string) ~ '::regclass' -%}
  {%- set schema = sql_literal(this.schema) -%}
  {%- set body -%}
do $vector_index_hook$
declare
    r record;
begin
    -- the same name on another table of the schema (a full refresh's backup relation): drop it first
    for r in
        select i.relname from pg_class as i
        inner join pg_index as x on x.indexrelid = i.oid
        inner join pg_namespace as n on n.oid = i.relnamespace
        where n.nspname = {{ schema }} and i.relname = {{ sql_literal(name) }} and x.indrelid <> {{ table }}
    loop
        execute format('drop index %I.%I', {{ schema }}, r.relname);
    end loop;
    -- any other hnsw index of this table (built with other parameters)
    for r in
        select i.relname from pg_index as x
        inner join pg_class as i on i.oid = x.indexrelid
        inner join pg_am as a on a.oid = i.relam
        where x.indrelid = {{ table }} and a.amname = 'hnsw' and i.relname <> {{ sql_literal(name) }}
    loop
        execute format('drop index %I.%I', {{ schema }}, r.relname);
    end loop;
    create index if not exists {{ adapter.quote(name) }} on {{ this }}
        using hnsw ((embedding::{{ embedding_type() | trim }}) vector_cosine_ops)
        with (m = {{ m }}, ef_construction = {{ ef }});
end
$vector_index_hook$
  {%- endset -%}
  {%- if body.count('$vector_index_hook$') != 2 -%}
    {{ exceptions.raise_compiler_error("vector_index_hook: a name holds the block's quote tag") }}
  {%- endif -%}
  {{ return(body) }}
{%- endmacro %}
