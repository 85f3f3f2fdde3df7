{#- One row per recall access event: a recall returned memory_id to user_id at accessed_at.
    Events of a forgotten user or memory are never loaded (the forget tombstones, read from their
    landing source). Incremental (append), the folder's materialization. -#}
{{ config(indexes=lookup_indexes([['event_id']])) }}

with source as (
    select *
    from {{ landing_rows(source('landing', 'access'), {
        'event_id': 'VARCHAR',
        'memory_id': 'VARCHAR',
        'user_id': 'VARCHAR',
        'query_id': 'VARCHAR',
        'accessed_at': 'VARCHAR',
    }, this if is_incremental() else none) }}
),

tombstones as (
    {{ landed_tombstones(source('landing', 'forget')) }}
),

renamed as (
    select
        event_id,
        memory_id,
        user_id,
        query_id,
        {{ try_cast_text('accessed_at', 'timestamptz') }} at time zone 'UTC' as accessed_at,
        _landing_file as landing_file,
        row_number() over (partition by event_id order by _landing_file) as landing_copy
    from source as landed
    where event_id is not null and memory_id is not null
        and not {{ is_forgotten_user_row('tombstones', 'landed.user_id', 'landed.accessed_at') }}
        and not {{ is_forgotten_memory('tombstones', 'landed.memory_id') }}
)

select
    event_id,
    memory_id,
    user_id,
    query_id,
    accessed_at,
    landing_file
from renamed
where landing_copy = 1
{% if is_incremental() %}
    and not exists (select 1 from {{ this }} as loaded where loaded.event_id = renamed.event_id)
{% endif %}
