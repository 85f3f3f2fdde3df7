{#- on-run-end: copy what serving needs into a new snapshot file beside the warehouse, then write
    its .ready marker. Readers open only snapshots whose marker exists, newest first, read-only,
    so they never see a half-written file and never hold a lock the builder needs.
    results: the run's results; nothing is published if any node errored or failed. -#}
{% macro publish_serving_snapshot(results) %}
  {{ return(adapter.dispatch('publish_serving_snapshot')(results)) }}
{% endmacro %}

{#- PostgreSQL serves from the live tables (MVCC gives readers a consistent view while a build
    runs), so there is no snapshot file to publish. -#}
{% macro postgres__publish_serving_snapshot(results) %}
  select 1;
{% endmacro %}

{% macro duckdb__publish_serving_snapshot(results) %}
  {%- if execute and flags.WHICH in ('build', 'run') -%}
    {%- set bad = results | selectattr('status', 'in', ['error', 'fail', 'runtime error']) | list -%}
    {%- set ltm = adapter.get_relation(database=target.database, schema=target.schema, identifier='long_term_memory') -%}
    {%- set rq = adapter.get_relation(database=target.database, schema=target.schema, identifier='recall_queries') -%}
    {%- if bad | length == 0 and ltm is not none and rq is not none -%}
      {%- set name = serving_dir() ~ '/snap-' ~ modules.datetime.datetime.utcnow().strftime('%Y%m%dT%H%M%S%f') ~ '-' ~ invocation_id[:8] -%}
      {%- do log('publishing serving snapshot ' ~ name ~ '.duckdb', info=true) -%}
      attach '{{ name }}.duckdb' as serving_snapshot;
      create table serving_snapshot.main.long_term_memory as
        select * from {{ ltm }} where valid_to is null order by user_id;
      create table serving_snapshot.main.recall_queries as select * from {{ rq }};
      create table serving_snapshot.main.memory_term_index as select * from {{ target.schema }}.memory_term_index order by user_id, term;
      create table serving_snapshot.main.memory_term_stats as select * from {{ target.schema }}.memory_term_stats order by user_id, term;
      {%- set ris = adapter.get_relation(database=target.database, schema=target.schema, identifier='recall_index_settings') %}
      {%- if ris is not none %}
      create table serving_snapshot.main.recall_index_settings as select * from {{ ris }};
      {%- endif %}
      detach serving_snapshot;
      copy (select '{{ invocation_id }}' as invocation_id) to '{{ name }}.ready' (format csv);
    {%- else -%}
      {%- do log('serving snapshot not published: ' ~ (bad | length) ~ ' node(s) errored or marts missing', info=true) -%}
      select 1;
    {%- endif -%}
  {%- else -%}
    select 1;
  {%- endif -%}
{% endmacro %}
