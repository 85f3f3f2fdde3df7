{#- Target-specific bodies of generic tests (tests/generic). -#}
{% macro duckdb__test_embedding_is_valid(model, column_name, dim=none) %}
{%- set d = dim if dim is not none else number_var('embedding_dim') -%}
select *
from {{ model }}
where {{ column_name }} is null
   or len({{ column_name }}::float[]) != {{ d }}
   or list_count(list_filter({{ column_name }}::float[], lambda x: x is null or isnan(x) or isinf(x))) > 0
   or list_count(list_filter({{ column_name }}::float[], lambda x: x != 0)) = 0
{% endmacro %}

{#- pgvector refuses NaN and infinity in a vector, so only length and all-zeros are checked. -#}
{% macro postgres__test_embedding_is_valid(model, column_name, dim=none) %}
{%- set d = dim if dim is not none else number_var('embedding_dim') -%}
select *
from {{ model }}
where {{ column_name }} is null
   or vector_dims({{ column_name }}) != {{ d }}
   or vector_norm({{ column_name }}) = 0
{% endmacro %}
