{#- The raw session log: every row any writer landed, exactly as it landed (all text), loaded
    incrementally from the landing source (DuckDB: the immutable landing files; PostgreSQL: the
    landing table; see the landing_rows macro). Nothing is judged here; only rows of a forgotten
    user landed before the forget, and replays of forgotten messages (user_id, message_id; either
    form of a derived id, macros/identity.sql), are never loaded (the forget tombstones, read from
    their landing source: a staging model reads no other staging model). door_reason is set on
    rows the writer's door refused (recall_shim/write/door.py); NULL on rows landed before the door
    existed. Incremental (append), the folder's materialization. -#}
{{ config(indexes=lookup_indexes([['landing_id']])) }}

with source as (
    select *
    from {{ landing_rows(source('landing', 'messages'), {
        'landing_id': 'VARCHAR',
        'user_id': 'VARCHAR',
        'session_id': 'VARCHAR',
        'agent_id': 'VARCHAR',
        'msg_seq': 'VARCHAR',
        'role': 'VARCHAR',
        'content': 'VARCHAR',
        'content_invalid_utf8': 'BOOLEAN',
        'ts': 'VARCHAR',
        'message_id': 'VARCHAR',
        'landed_at': 'VARCHAR',
        'door_reason': 'VARCHAR',
        'landing_seq': 'VARCHAR',
    }, this if is_incremental() else none) }}
),

tombstones as (
    {{ landed_tombstones(source('landing', 'forget')) }}
),

renamed as (
    select
        landing_id,
        user_id,
        session_id,
        agent_id,
        msg_seq,
        role,
        content,
        coalesce(content_invalid_utf8, false) as is_invalid_utf8,
        ts,
        message_id,
        landed_at,
        door_reason,
        {{ try_cast_text('landing_seq', 'bigint') }} as landing_seq,
        _landing_file as landing_file,
        '{{ run_started_at.strftime("%Y-%m-%d %H:%M:%S.%f") }}'::timestamp as loaded_at,
        row_number() over (partition by landing_id order by _landing_file) as landing_copy
    from source as landed
    where landing_id is not null
        and not {{ is_forgotten_user_row('tombstones', 'landed.user_id', 'landed.landed_at') }}
        and not {{ is_forgotten_message('tombstones', 'landed.user_id', [
            resolved_message_id('landed.', true), resolved_message_id('landed.', false)]) }}
)

select
    landing_id,
    user_id,
    session_id,
    agent_id,
    msg_seq,
    role,
    content,
    is_invalid_utf8,
    ts,
    message_id,
    landed_at,
    door_reason,
    landing_seq,
    landing_file,
    loaded_at
from renamed
where landing_copy = 1
{% if is_incremental() %}
    and not exists (select 1 from {{ this }} as loaded where loaded.landing_id = renamed.landing_id)
{% endif %}
