{#- Fails for rows whose embedding is NULL, has the wrong length, contains NULL/NaN/inf, or is all
    zeros (a zero vector has no cosine). -#}
{% test embedding_is_valid(model, column_name, dim=none) %}
{{ adapter.dispatch('test_embedding_is_valid')(model, column_name, dim) }}
{% endtest %}
