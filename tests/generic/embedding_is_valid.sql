{#- Fails for rows whose embedding is NULL, has the wrong length, contains NULL/NaN/inf, or is all
    zeros (a zero vector has no cosine). latest_by: a column of an append-only model (e.g.
    embedded_at); only rows with its latest value are checked, so each row is checked once, by the
    build that appended it, instead of every vector on every build. -#}
{% test embedding_is_valid(model, column_name, dim=none, latest_by=none) %}
{%- set d = dim if dim is not none else var('embedding_dim') -%}
select *
from {{ model }}
where ({{ column_name }} is null
   or len({{ column_name }}::float[]) != {{ d }}
   or list_count(list_filter({{ column_name }}::float[], lambda x: x is null or isnan(x) or isinf(x))) > 0
   or list_count(list_filter({{ column_name }}::float[], lambda x: x != 0)) = 0)
{%- if latest_by is not none %}
  and {{ latest_by }} = (select max(latest.{{ latest_by }}) from {{ model }} as latest)
{%- endif %}
{% endtest %}
