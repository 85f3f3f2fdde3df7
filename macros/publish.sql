{#- on-run-end: publish what serving needs into a new snapshot file beside the warehouse, then
    write its .ready marker. Readers open only snapshots whose marker exists, newest first,
    read-only, so they never see a half-written file and never hold a lock the builder needs.
    A snapshot is a base (a full copy) or a delta over the previous snapshot's chain of layers
    (docs/serving.md "Layered snapshots"): serving_layer_plan decides which.
    results: the run's results; nothing is published if any node errored or failed. -#}
{% macro publish_serving_snapshot(results) %}
  {{ return(adapter.dispatch('publish_serving_snapshot')(results)) }}
{% endmacro %}

{#- PostgreSQL serves from the live tables (MVCC gives readers a consistent view while a build
    runs), so there is no snapshot file to publish. What a build publishes instead is a new store
    generation (migration 7, recall_shim/targets/postgres/generation.py): readers that keep a
    user's memories in memory (user_cache.py) read them again. After failed nodes too (a model may
    have committed before another failed); a schema without the table is left as it is. -#}
{% macro postgres__publish_serving_snapshot(results) %}
do $bump$
begin
    if to_regclass('{{ target.schema }}.store_generation') is not null then
        update {{ target.schema }}.store_generation set generation = generation + 1, changed_at = now() where id = 1;
    end if;
end
$bump$;
{% endmacro %}

{#- The alias a snapshot file is attached under when another snapshot uses it as a layer (twin of
    recall_shim/serving/snapshot.py layer_alias). -#}
{% macro serving_layer_alias(file) -%}
  {{- 'l_' ~ modules.re.sub('[^a-z0-9]', '_', (file[:-7] if file.endswith('.duckdb') else file) | lower) -}}
{%- endmacro %}

{#- The row order a snapshot stores `table` in (var serving_tables, which the shim reads too):
    'order by <columns>', or nothing. -#}
{% macro serving_order(table) -%}
  {%- set cols = name_map_var('serving_tables')[table] -%}
  {{- 'order by ' ~ cols if cols else '' -}}
{%- endmacro %}

{#- A table's columns in order: 'name type' strings (for comparing a layer's table with the
    warehouse's), or names only. Uses run_query: adapter.get_columns_in_relation would open a
    transaction that the end of the on-run-end hook rolls back. -#}
{% macro serving_columns(database, schema, table, with_types=true) -%}
  {%- set rows = run_query("select column_name, data_type from duckdb_columns() where database_name = " ~ sql_literal(database)
      ~ " and schema_name = " ~ sql_literal(schema) ~ " and table_name = " ~ sql_literal(table) ~ " order by column_index") -%}
  {{ return(rows.rows | map('join', ' ') | list if with_types else rows.columns[0].values() | list) }}
{%- endmacro %}

{#- Decide whether this build publishes a base or a delta. Returns a dict: kind ('base' | 'delta'),
    reason, and for a delta: layers (the previous chain, as rows of its serving_layers), prev_alias,
    prev_state (SQL of the previous snapshot's current memories and the layer of each),
    watermark (SQL timestamp literal) and delta_rows (rows the new delta will hold).
    ltm / mti: the warehouse's long_term_memory and memory_term_index relations. -#}
{% macro serving_layer_plan(ltm, mti) %}
  {%- set folder = serving_dir() -%}
  {%- set base = {'kind': 'base'} -%}
  {%- if flags.FULL_REFRESH -%}
    {%- do base.update({'reason': 'full refresh'}) -%}{{ return(base) }}
  {%- endif -%}
  {%- set files = run_query("select parse_filename(file) from glob(" ~ sql_literal(glob_escape(folder ~ '/' ~ store_layout('snapshot_prefix')) ~ '*') ~ ") order by 1").columns[0].values() | list -%}
  {%- set ready = [] -%}
  {%- set mark = store_layout('ready') -%}
  {%- for f in files if f.endswith(mark) and (f[:-(mark | length)] ~ '.duckdb') in files -%}
    {%- do ready.append(f[:-(mark | length)] ~ '.duckdb') -%}
  {%- endfor -%}
  {%- if ready | length == 0 -%}
    {%- do base.update({'reason': 'no previous snapshot'}) -%}{{ return(base) }}
  {%- endif -%}
  {%- set prev = ready[-1] -%}
  {%- do run_query("attach " ~ sql_literal(folder ~ '/' ~ prev) ~ " as serving_prev (read_only)") -%}
  {%- set plan = {} -%}
  {%- set tables = run_query("select table_name from duckdb_tables() where database_name = 'serving_prev'").columns[0].values() | list -%}
  {%- if 'serving_layers' not in tables -%}
    {%- do plan.update({'kind': 'base', 'reason': 'previous snapshot has no serving_layers'}) -%}
  {%- else -%}
    {%- set layers = run_query("select layer, file, alias, rows, watermark::varchar, kind"
        ~ " from serving_prev.main.serving_layers order by layer").rows -%}
    {%- set missing = layers | map(attribute=1) | reject('in', files) | list -%}
    {#- a layer's alias is attached and named in SQL: it must be the one its file name gives -#}
    {%- set odd = [] -%}
    {%- for l in layers if l[1] is none or l[2] != serving_layer_alias(l[1]) -%}{%- do odd.append(l[1] | string) -%}{%- endfor -%}
    {%- set prev_delta = layers[-1][5] == 'delta' -%}
    {%- set ltm_table = 'delta_memories' if prev_delta else 'long_term_memory' -%}
    {%- set mti_table = 'delta_term_index' if prev_delta else 'memory_term_index' -%}
    {%- set watermark = sql_literal(layers[-1][4]) ~ "::timestamp" if layers[-1][4] is not none else "'-infinity'::timestamp" -%}
    {%- set prev_state = 'select memory_id, layer from serving_prev.main.memory_state' if prev_delta
        else 'select memory_id, 0 as layer from serving_prev.main.long_term_memory' -%}
    {%- if missing | length > 0 -%}
      {%- do plan.update({'kind': 'base', 'reason': 'layer file(s) missing: ' ~ (missing | join(', '))}) -%}
    {%- elif odd | length > 0 -%}
      {%- do plan.update({'kind': 'base', 'reason': 'unexpected layer alias(es): ' ~ (odd | join(', '))}) -%}
    {%- elif layers[-1][1] != prev -%}
      {%- do plan.update({'kind': 'base', 'reason': 'previous snapshot does not list itself last'}) -%}
    {%- elif layers | length >= number_var('serving_max_layers') -%}
      {%- do plan.update({'kind': 'base', 'reason': (layers | length) ~ ' layers (serving_max_layers)'}) -%}
    {%- elif serving_columns(ltm.database, ltm.schema, ltm.identifier) != serving_columns('serving_prev', 'main', ltm_table)
        or serving_columns(mti.database, mti.schema, mti.identifier) != serving_columns('serving_prev', 'main', mti_table) -%}
      {%- do plan.update({'kind': 'base', 'reason': 'long_term_memory or memory_term_index columns changed'}) -%}
    {%- else -%}
      {%- set prev_sql = prev_state.replace('serving_prev', layers[-1][2]) -%}
      {%- set delta_rows = run_query("select count(*) from " ~ ltm ~ " where valid_to is null and (consolidated_at > "
          ~ watermark ~ " or memory_id not in (select p.memory_id from (" ~ prev_state ~ ") as p))").columns[0].values()[0] -%}
      {%- set chain_rows = (layers | selectattr(5, 'equalto', 'delta') | map(attribute=3) | sum) + delta_rows -%}
      {%- set base_rows = layers[0][3] -%}
      {%- if chain_rows > number_var('serving_compact_share') * base_rows -%}
        {%- do plan.update({'kind': 'base', 'reason': chain_rows ~ ' delta rows > serving_compact_share x ' ~ base_rows ~ ' base rows'}) -%}
      {%- else -%}
        {%- do plan.update({'kind': 'delta', 'reason': (layers | length) ~ ' layer(s) below', 'layers': layers,
            'prev_state': prev_sql, 'watermark': watermark, 'delta_rows': delta_rows}) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endif -%}
  {%- do run_query("detach serving_prev") -%}
  {{ return(plan) }}
{% endmacro %}

{#- What a publish published, for the shim (recall_shim/serving/snapshot.py read_manifest) and anyone
    else: one JSON object in <stem>.serving/published.json (var store_layout), written after the snapshot's .ready
    marker: snapshot (file name), kind (base | delta), reason, layers (the files it reads, oldest
    first, itself last), built_at (UTC), invocation_id (dbt's, as in target/run_results.json).
    DuckDB writes it to a temporary name and renames it into place (use_tmp_file), so a reader
    sees the previous manifest or this one, never a part. The log line "publishing serving
    snapshot" is a message for people; nothing parses it. -#}
{% macro serving_manifest(stem, plan, built_at) -%}
  {%- set layers = (plan.layers | map(attribute=1) | list if plan.kind == 'delta' else []) + [stem ~ '.duckdb'] -%}
copy (select {{ sql_literal(stem ~ '.duckdb') }} as snapshot, {{ sql_literal(plan.kind) }} as kind,
    {{ sql_literal(plan.reason) }} as reason, [{{ sql_string_list(layers) }}]::varchar[] as layers,
    {{ sql_literal(built_at.strftime('%Y-%m-%dT%H:%M:%S.%fZ')) }} as built_at,
    {{ sql_literal(invocation_id) }} as invocation_id)
  to {{ sql_literal(serving_dir() ~ '/' ~ store_layout('manifest')) }} (format json, use_tmp_file true);
{%- endmacro %}

{% macro duckdb__publish_serving_snapshot(results) %}
  {%- if execute and flags.WHICH in ('build', 'run') -%}
    {%- set bad = results | selectattr('status', 'in', ['error', 'fail', 'runtime error']) | list -%}
    {%- set ltm = adapter.get_relation(database=target.database, schema=target.schema, identifier='long_term_memory') -%}
    {%- set mti = adapter.get_relation(database=target.database, schema=target.schema, identifier='memory_term_index') -%}
    {%- set rq = adapter.get_relation(database=target.database, schema=target.schema, identifier='recall_queries') -%}
    {%- if bad | length == 0 and ltm is not none and mti is not none and rq is not none -%}
      {%- set started = modules.datetime.datetime.utcnow() -%}
      {%- set stem = store_layout('snapshot_prefix') ~ started.strftime('%Y%m%dT%H%M%S%f') ~ '-' ~ invocation_id[:8] -%}
      {%- set name = serving_dir() ~ '/' ~ stem -%}
      {%- set plan = serving_layer_plan(ltm, mti) -%}
      {%- set wm_now = "(select coalesce(max(consolidated_at), '-infinity'::timestamp) from " ~ ltm ~ ")" -%}
      {%- do log('publishing serving snapshot ' ~ name ~ '.duckdb', info=true) -%}
      {%- do log('serving snapshot kind: ' ~ plan.kind ~ ' (' ~ plan.reason ~ ')'
          ~ (', ' ~ plan.delta_rows ~ ' changed memories' if plan.kind == 'delta' else ''), info=true) -%}
      attach {{ sql_literal(name ~ '.duckdb') }} as serving_snapshot;
      create table serving_snapshot.main.recall_queries as select * from {{ rq }} {{ serving_order('recall_queries') }};
      create table serving_snapshot.main.memory_term_stats as select * from {{ target.schema }}.memory_term_stats {{ serving_order('memory_term_stats') }};
      {%- set ris = adapter.get_relation(database=target.database, schema=target.schema, identifier='recall_index_settings') %}
      {%- if ris is not none %}
      create table serving_snapshot.main.recall_index_settings as select * from {{ ris }} {{ serving_order('recall_index_settings') }};
      {%- endif %}
      {%- if plan.kind == 'base' %}
      create table serving_snapshot.main.long_term_memory as
        select * from {{ ltm }} where valid_to is null {{ serving_order('long_term_memory') }};
      create table serving_snapshot.main.memory_term_index as select * from {{ mti }} {{ serving_order('memory_term_index') }};
      create table serving_snapshot.main.serving_layers as
        select 0::integer as layer, {{ sql_literal(stem ~ '.duckdb') }}::varchar as file, {{ sql_literal(serving_layer_alias(stem)) }}::varchar as alias,
            (select count(*) from serving_snapshot.main.long_term_memory)::bigint as rows,
            {{ wm_now }}::timestamp as watermark, 'base'::varchar as kind;
      {%- else %}
      {%- set n = plan.layers | length %}
      {%- for l in plan.layers %}
      attach {{ sql_literal(serving_dir() ~ '/' ~ l[1]) }} as {{ l[2] }} (read_only);
      {%- endfor %}
      create table serving_snapshot.main.delta_memories as
        select * from {{ ltm }}
        where valid_to is null
            and (consolidated_at > {{ plan.watermark }} or memory_id not in (select p.memory_id from ({{ plan.prev_state }}) as p))
        {{ serving_order('long_term_memory') }};
      create table serving_snapshot.main.delta_term_index as
        select * from {{ mti }} where memory_id in (select d.memory_id from serving_snapshot.main.delta_memories as d)
        {{ serving_order('memory_term_index') }};
      create table serving_snapshot.main.memory_state as
        select l.memory_id, l.user_id, (case when d.memory_id is not null then {{ n }} else p.layer end)::integer as layer,
            l.strength, l.last_accessed, l.access_count, l.strength_as_of
        from {{ ltm }} as l
        left join (select memory_id from serving_snapshot.main.delta_memories) as d on d.memory_id = l.memory_id
        left join ({{ plan.prev_state }}) as p on p.memory_id = l.memory_id
        where l.valid_to is null
        order by l.user_id, l.memory_id;
      create table serving_snapshot.main.serving_layers as
        select * from {{ plan.layers[-1][2] }}.main.serving_layers
        union all
        select {{ n }}, {{ sql_literal(stem ~ '.duckdb') }}, {{ sql_literal(serving_layer_alias(stem)) }},
            (select count(*) from serving_snapshot.main.delta_memories), {{ wm_now }}, 'delta';
      {%- set strength_cols = ['strength', 'last_accessed', 'access_count', 'strength_as_of'] %}
      {%- for view, base_table, delta_table, rel in [('long_term_memory', 'long_term_memory', 'delta_memories', ltm),
                                                     ('memory_term_index', 'memory_term_index', 'delta_term_index', mti)] %}
      {%- set cols = serving_columns(rel.database, rel.schema, rel.identifier, with_types=false) %}
      {#- unqualified names in a view bind to the view's own file, whatever it is attached as #}
      create view serving_snapshot.main.{{ view }} as
        select {% for c in cols %}{{ 's.' if view == 'long_term_memory' and c in strength_cols else 'm.' }}{{ c }}{{ ', ' if not loop.last }}{% endfor %}
        from memory_state as s
        inner join (
          {%- for l in plan.layers %}
          select {{ cols | join(', ') }}, {{ l[0] }} as serving_layer
          from {{ l[2] }}.main.{{ base_table if l[5] == 'base' else delta_table }}
          union all
          {%- endfor %}
          select {{ cols | join(', ') }}, {{ n }} as serving_layer from {{ delta_table }}
        ) as m on m.memory_id = s.memory_id and m.serving_layer = s.layer;
      {%- endfor %}
      {%- for l in plan.layers %}
      detach {{ l[2] }};
      {%- endfor %}
      {%- endif %}
      detach serving_snapshot;
      copy (select {{ sql_literal(invocation_id) }} as invocation_id) to {{ sql_literal(name ~ store_layout('ready')) }} (format csv);
      {{ serving_manifest(stem, plan, started) }}
    {%- else -%}
      {%- do log('serving snapshot not published: ' ~ (bad | length) ~ ' node(s) errored or marts missing', info=true) -%}
      select 1;
    {%- endif -%}
  {%- else -%}
    select 1;
  {%- endif -%}
{% endmacro %}
