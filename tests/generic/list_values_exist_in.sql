{#- Fails for every element of the list column that has no row in to.field (provenance check). -#}
{% test list_values_exist_in(model, column_name, to, field) %}
with elements as (
    select unnest({{ column_name }}) as element
    from {{ model }}
)
select elements.element
from elements
left join {{ to }} as parent on elements.element = parent.{{ field }}
where parent.{{ field }} is null
{% endtest %}
