{#- Jinja twin of recall_shim/_paths.py: one DuckDB path names the whole store. -#}
{% macro store_stem() -%}
  {%- set p = var('store_path') -%}
  {{- p[:-7] if p.endswith('.duckdb') else p -}}
{%- endmacro %}

{% macro inbox_dir() -%}{{ store_stem() }}.inbox{%- endmacro %}

{% macro serving_dir() -%}{{ store_stem() }}.serving{%- endmacro %}

{#- read_json over one landing folder with an explicit schema; every value lands as text so that
    staging, not the reader, decides what is valid. -#}
{% macro read_landing(folder, columns) -%}
read_json(
    '{{ inbox_dir() }}/{{ folder }}/*.jsonl',
    format = 'newline_delimited',
    columns = {
      {%- for name, type in columns.items() %}
        '{{ name }}': '{{ type }}'{{ "," if not loop.last }}
      {%- endfor %}
    },
    filename = '_landing_file'
)
{%- endmacro %}
