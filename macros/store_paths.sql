{#- One DuckDB path names the whole store; the names beside it are var store_layout
    (dbt_project.yml), which recall_shim/common/paths.py reads too. Paths reach SQL only through
    sql_literal (and glob_escape where DuckDB reads them as a glob), macros/vars.sql. -#}
{% macro store_stem() -%}
  {%- set p = string_var('store_path') -%}
  {{- p[:-7] if p.endswith('.duckdb') else p -}}
{%- endmacro %}

{#- One name of var store_layout (inbox, serving, empty_marker, snapshot_prefix, ready, manifest, ...). -#}
{% macro store_layout(key) -%}{{ return(name_map_var('store_layout')[key]) }}{%- endmacro %}

{% macro inbox_dir() -%}{{ store_stem() }}{{ store_layout('inbox') }}{%- endmacro %}

{% macro serving_dir() -%}{{ store_stem() }}{{ store_layout('serving') }}{%- endmacro %}

{#- The landing files of one folder that ``relation`` (an incremental staging model with a
    landing_file column) has not loaded yet, plus the folder's empty marker (so the list is never
    empty). An incremental build reads only these: its cost follows what is new, not everything
    ever landed. Files are immutable and appear atomically, so a file landing after this listing
    is simply read by the next build. Returns none (read every file) for a table built before it
    had a landing_file column. -#}
{% macro new_landing_files(folder, relation) -%}
  {%- set marker = inbox_dir() ~ '/' ~ folder ~ '/' ~ store_layout('empty_marker') -%}
  {%- if not execute -%}{{ return([marker]) }}{%- endif -%}
  {%- set known = adapter.get_columns_in_relation(relation) | map(attribute='name') | list -%}
  {%- if 'landing_file' not in known -%}{{ return(none) }}{%- endif -%}
  {%- set sql -%}
    select file from glob({{ sql_literal(glob_escape(inbox_dir() ~ '/' ~ folder) ~ '/*.jsonl') }})
    where file not in (select landing_file from {{ relation }} where landing_file is not null)
    order by file
  {%- endset -%}
  {%- set files = run_query(sql).columns[0].values() | list -%}
  {{ return(files if marker in files else files + [marker]) }}
{%- endmacro %}

{#- The largest landing line read_json accepts. The door (recall_shim/write/door.py) keeps new lines
    far below it (max_content_chars characters, at most 12 bytes each as ensure_ascii JSON), but
    files landed by older versions may hold a single 34 MB message: a build must load it (staging
    rejects it as content_too_long) rather than fail for every user. 1 GiB bounds a line's buffer. -#}
{% macro landing_max_object_bytes() -%}1073741824{%- endmacro %}

{#- read_json over one landing folder (or the given list of its files) with an explicit schema;
    every value lands as text so that staging, not the reader, decides what is valid. -#}
{% macro read_landing(folder, columns, files=none) -%}
read_json(
    {% if files is none -%}
    {{ sql_literal(glob_escape(inbox_dir() ~ '/' ~ folder) ~ '/*.jsonl') }},
    {%- else -%}
    [{% for f in files %}{{ sql_literal(glob_escape(f)) }}{{ ", " if not loop.last }}{% endfor %}],
    {%- endif %}
    format = 'newline_delimited',
    maximum_object_size = {{ landing_max_object_bytes() }},
    columns = {
      {%- for name, type in columns.items() %}
        {{ sql_literal(name) }}: {{ sql_literal(type) }}{{ "," if not loop.last }}
      {%- endfor %}
    },
    filename = '_landing_file'
)
{%- endmacro %}
