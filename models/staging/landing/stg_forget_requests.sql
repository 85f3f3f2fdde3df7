{#- One row per forget tombstone: ids only, never content. Written by MemoryStore.forget into
    <store>.inbox/forget/. A 'user' tombstone excludes every row of user_id that landed at or
    before forgotten_at; a 'memory' tombstone excludes memory_id (of user_id) forever; a
    'message' tombstone drops the message (user_id, message_id) forever, so that a replay of a
    forgotten row (ingest --force, a re-sent message) never comes back. Consolidation reads this
    (and staging the same landed tombstones, landed_tombstones) so that forgotten data never
    comes back, not even on --full-refresh. A table rebuilt in full on every run (the folder's
    default is incremental; see _landing__models.yml). -#}
{{ config(materialized='table') }}

with source as (
    select *
    from {{ landing_rows(source('landing', 'forget'), forget_landing_columns()) }}
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
    from source
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
