{#- Fails for rows whose embedding is NULL, has the wrong length, contains NULL/NaN/inf, or is all
    zeros (a zero vector has no cosine). latest_by: a column of an append-only model (e.g.
    embedded_at); only rows with its latest value are checked, so each row is checked once, by the
    build that appended it, instead of every vector on every build. The per-target row check is in
    macros/test_dialect.sql. -#}
{% test embedding_is_valid(model, column_name, dim=none, latest_by=none) %}
{%- if latest_by is not none %}
{%- set checked -%}
(select * from {{ model }} where {{ latest_by }} = (select max(latest.{{ latest_by }}) from {{ model }} as latest)) as checked_rows
{%- endset %}
{%- else %}
{%- set checked = model %}
{%- endif %}
{{ adapter.dispatch('test_embedding_is_valid')(checked, column_name, dim) }}
{% endtest %}
