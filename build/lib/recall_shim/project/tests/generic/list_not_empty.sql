{#- Fails for rows whose list column is NULL or empty. -#}
{% test list_not_empty(model, column_name) %}
select *
from {{ model }}
where {{ column_name }} is null or {{ list_length(column_name) }} = 0
{% endtest %}
