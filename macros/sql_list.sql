{#- A Jinja list of strings as a SQL list of quoted literals: ['a', 'b'] -> 'a', 'b'.
    values: list of strings (e.g. a var). Quotes are doubled. -#}
{% macro sql_string_list(values) -%}
  {%- for v in values -%}'{{ v | replace("'", "''") }}'{{ ", " if not loop.last }}{%- endfor -%}
{%- endmacro %}
