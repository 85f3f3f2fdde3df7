{#- The one place SQL learns the embedding type and calls the model. -#}
{% macro embedding_type(dim=none) -%}
  FLOAT[{{ dim if dim is not none else var('embedding_dim') }}]
{%- endmacro %}

{#- Key of one embedded text under the configured model and memory form. -#}
{% macro embedding_key(text_expr) -%}
  md5(concat_ws('|', '{{ var("embedding_model") }}', '{{ var("embedding_memory_form") }}', {{ text_expr }}))
{%- endmacro %}

{% macro embed_sql(text_expr, form) -%}
  embed({{ text_expr }}, '{{ var("embedding_model") }}', '{{ form }}')::{{ embedding_type() }}
{%- endmacro %}
