{#- How the incrementally loaded models write on PostgreSQL (docs/scaling_out.md, "Incremental
    builds"). DuckDB uses dbt-duckdb's own strategies; nothing here changes it. -#}

{#- The incremental strategy of long_term_memory: dbt-duckdb's merge with the model's
    merge_clauses on DuckDB; on PostgreSQL 'kept_memory_merge' (below), because PostgreSQL 16's
    MERGE has no WHEN NOT MATCHED BY SOURCE. -#}
{% macro kept_memory_strategy() -%}
  {{ return('merge' if target.type == 'duckdb' else 'kept_memory_merge') }}
{%- endmacro %}

{#- The model's merge_clauses as plain statements (PostgreSQL): the source holds one row per kept
    memory, with its content columns only where the memory was written this run (consolidated_at
    not NULL). Rows no longer kept are deleted; written rows are updated in full; every other row
    gets the columns of the when_matched clause with mode 'explicit' (the strength columns) and
    only where they changed; new rows are inserted. An update that leaves the indexed columns
    alone (embedding, user_id, memory_id, consolidated_at) is a heap-only tuple update when the
    page has room (the model's fillfactor), so the HNSW and btree indexes are not touched. -#}
{% macro get_incremental_kept_memory_merge_sql(arg_dict) -%}
  {%- set target_rel = arg_dict['target_relation'] -%}
  {%- set source_rel = arg_dict['temp_relation'] -%}
  {%- set key = arg_dict['unique_key'] -%}
  {%- set columns = arg_dict['dest_columns'] | map(attribute='name') | list -%}
  {%- set partial = [] -%}
  {%- for clause in config.get('merge_clauses', {}).get('when_matched', []) if clause.get('mode') == 'explicit' -%}
    {%- do partial.extend(clause['update']['include']) -%}
  {%- endfor -%}
  {%- if not partial -%}
    {{ exceptions.raise_compiler_error('kept_memory_merge needs a when_matched clause with mode explicit') }}
  {%- endif -%}
delete from {{ target_rel }} as t
where not exists (select 1 from {{ source_rel }} as s where s.{{ key }} = t.{{ key }});

update {{ target_rel }} as t set
    {%- for c in columns if c != key %}
    {{ adapter.quote(c) }} = s.{{ adapter.quote(c) }}{{ ',' if not loop.last }}
    {%- endfor %}
from {{ source_rel }} as s
where s.{{ key }} = t.{{ key }} and s.consolidated_at is not null;

update {{ target_rel }} as t set
    {%- for c in partial %}
    {{ adapter.quote(c) }} = s.{{ adapter.quote(c) }}{{ ',' if not loop.last }}
    {%- endfor %}
from {{ source_rel }} as s
where s.{{ key }} = t.{{ key }} and s.consolidated_at is null
    and ({% for c in partial %}{{ 'or ' if not loop.first }}t.{{ adapter.quote(c) }} is distinct from s.{{ adapter.quote(c) }} {% endfor %});

insert into {{ target_rel }} ({% for c in columns %}{{ adapter.quote(c) }}{{ ', ' if not loop.last }}{% endfor %})
select {% for c in columns %}s.{{ adapter.quote(c) }}{{ ', ' if not loop.last }}{% endfor %}
from {{ source_rel }} as s
where not exists (select 1 from {{ target_rel }} as t where t.{{ key }} = s.{{ key }})
{%- endmacro %}

{#- dbt-postgres's create_table_as with one addition: a model's `fillfactor` config becomes the
    table's storage parameter (long_term_memory: room in each page for the next build's strength
    update, so it stays a heap-only update that no index sees). Otherwise as the adapter's. -#}
{% macro postgres__create_table_as(temporary, relation, sql) -%}
  {%- set unlogged = config.get('unlogged', default=false) -%}
  {%- set sql_header = config.get('sql_header', none) -%}
  {%- set fillfactor = config.get('fillfactor', none) -%}

  {{ sql_header if sql_header is not none }}

  create {% if temporary -%}
    temporary
  {%- elif unlogged -%}
    unlogged
  {%- endif %} table {{ relation }}
  {% set contract_config = config.get('contract') %}
  {% if contract_config.enforced %}
    {{ get_assert_columns_equivalent(sql) }}
  {% endif -%}
  {% if contract_config.enforced and (not temporary) -%}
      {{ get_table_columns_and_constraints() }}
      {%- if fillfactor is not none %} with (fillfactor = {{ fillfactor | int }}){% endif %} ;
    insert into {{ relation }} (
      {{ adapter.dispatch('get_column_names', 'dbt')() }}
    )
    {%- set sql = get_select_subquery(sql) %}
  {% else %}
    {%- if fillfactor is not none and not temporary %} with (fillfactor = {{ fillfactor | int }}){% endif %}
    as
  {% endif %}
  (
    {{ sql }}
  );
{%- endmacro %}

{#- Post-hook of a Python incremental model (DuckDB): drop the tables <identifier>__dbt_tmp<time>
    dbt-duckdb leaves behind. Its py_write_table creates the run's new rows as a plain table
    whatever `temporary` says, and the materialization drops only what it did not ask to be
    temporary, so every incremental run left one table in the warehouse (one per build in an
    analyst's catalog). Runs after the rows were appended; drops every leftover of the model,
    older builds' too. -#}
{% macro drop_python_model_leftovers(relation) -%}
  {%- if execute and target.type == 'duckdb' -%}
    {%- set found = run_query(
        "select schema_name, table_name from duckdb_tables() where database_name = current_database()"
        ~ " and starts_with(table_name, " ~ sql_literal(relation.identifier ~ '__dbt_tmp') ~ ")") -%}
    {%- for row in found.rows -%}
      {%- do run_query("drop table if exists " ~ adapter.quote(row[0]) ~ "." ~ adapter.quote(row[1])) -%}
    {%- endfor -%}
  {%- endif -%}
select 1
{%- endmacro %}
