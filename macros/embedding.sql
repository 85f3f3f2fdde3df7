{#- The one place SQL learns the embedding type and calls the model. -#}
{% macro embedding_type(dim=none) -%}
  {{ return(adapter.dispatch('embedding_type')(dim)) }}
{%- endmacro %}

{% macro duckdb__embedding_type(dim=none) -%}
  FLOAT[{{ dim if dim is not none else number_var('embedding_dim') }}]
{%- endmacro %}

{#- pgvector's column type (PostgreSQL target). -#}
{% macro postgres__embedding_type(dim=none) -%}
  vector({{ dim if dim is not none else number_var('embedding_dim') }})
{%- endmacro %}

{#- Key of one embedded text: md5 of the configured model, the form expression and the text. -#}
{% macro embedding_key(text_expr, form_expr) -%}
  md5(concat_ws('|', {{ sql_literal(string_var('embedding_model')) }}, {{ form_expr }}, {{ text_expr }}))
{%- endmacro %}

{#- The e5 form a memory of this kind is embedded with (episodes and assistant memories are whole
    chat messages). -#}
{% macro embedding_form_for_kind(kind_expr) -%}
  case when {{ kind_expr }} in ('episode', 'assistant') then {{ sql_literal(choice_var('embedding_episode_form')) }} else {{ sql_literal(choice_var('embedding_memory_form')) }} end
{%- endmacro %}

{% macro embed_sql(text_expr, form) -%}
  embed({{ text_expr }}, {{ sql_literal(string_var('embedding_model')) }}, {{ sql_literal(form) }})::{{ embedding_type() }}
{%- endmacro %}
