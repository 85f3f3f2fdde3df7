{#- Fails for every combination of `columns` that more than one row of the model has (a
    composite key, e.g. a message's identity (user_id, message_id)). -#}
{% test unique_columns(model, columns) %}
select {{ columns | join(', ') }}, count(*) as n_rows
from {{ model }}
group by {{ columns | join(', ') }}
having count(*) > 1
{% endtest %}
