{#- Fails for every element of the list column that has no row in to.field (provenance check).
    With also_match (a column both relations have, e.g. user_id), the parent row must also have
    the same value there: message ids are unique per user, so a memory's source message is
    (user_id, message_id). -#}
{% test list_values_exist_in(model, column_name, to, field, also_match=none) %}
with elements as (
    select
        {% if also_match is not none %}{{ also_match }} as matched,{% endif %}
        unnest({{ column_name }}) as element
    from {{ model }}
)
select elements.element
from elements
left join {{ to }} as parent
    on elements.element = parent.{{ field }}
    {% if also_match is not none %}and elements.matched = parent.{{ also_match }}{% endif %}
where parent.{{ field }} is null
{% endtest %}
