{#- One row per forget tombstone: ids only, never content. Written by MemoryStore.forget into
    <store>.inbox/forget/. A 'user' tombstone excludes every row of user_id that landed at or
    before forgotten_at; a 'memory' tombstone excludes memory_id (of user_id) forever; a
    'message' tombstone drops the message (user_id, message_id) forever, so that a replay of a
    forgotten row (ingest --force, a re-sent message) never comes back. Staging and
    consolidation read this so that forgotten data never comes back, not even on --full-refresh. -#}
with landed as (
    select *
    from {{ landing_rows('forget', {
        'tombstone_id': 'VARCHAR',
        'scope': 'VARCHAR',
        'user_id': 'VARCHAR',
        'memory_id': 'VARCHAR',
        'message_id': 'VARCHAR',
        'forgotten_at': 'VARCHAR',
    }) }}
),

renamed as (
    select
        tombstone_id,
        scope,
        user_id,
        memory_id,
        message_id,
        {{ try_cast_text('forgotten_at', 'timestamp') }} as forgotten_at,
        row_number() over (partition by tombstone_id order by _landing_file) as landing_copy
    from landed
    where tombstone_id is not null
)

select
    tombstone_id,
    scope,
    user_id,
    memory_id,
    message_id,
    forgotten_at
from renamed
where landing_copy = 1
