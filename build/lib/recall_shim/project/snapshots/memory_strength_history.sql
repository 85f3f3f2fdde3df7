{#- Strength history: a new row per memory whenever its strength (to 3 decimals), access count
    or last access changes between builds; dbt_valid_from/dbt_valid_to bound each value.
    Memories that disappear (forgotten) are closed with dbt_valid_to. -#}
{% snapshot memory_strength_history %}
{{ config(
    unique_key='memory_id',
    strategy='check',
    check_cols=['strength', 'access_count', 'last_accessed'],
    target_schema=target.schema,
    hard_deletes='invalidate',
) }}

    select
        memory_id,
        user_id,
        kind,
        {{ round_places('strength', 3) }} as strength,
        access_count,
        last_accessed,
        strength_as_of
    from {{ ref('long_term_memory') }}

{% endsnapshot %}
