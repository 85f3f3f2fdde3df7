{#- The raw session log: every row any writer landed, exactly as it landed (all text), loaded
    incrementally from the immutable landing files. Nothing is judged here; only rows of a
    forgotten user (stg_forget_requests) are never loaded. -#}
{{ config(materialized='incremental', incremental_strategy='append') }}

with landed as (
    select *
    from {{ read_landing('messages', {
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
    }, new_landing_files('messages', this) if is_incremental() else none) }}
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
        _landing_file as landing_file,
        '{{ run_started_at.strftime("%Y-%m-%d %H:%M:%S.%f") }}'::timestamp as loaded_at
    from landed
    where landing_id is not null
        and not {{ is_forgotten_user_row('landed.user_id', 'landed.landed_at') }}
    qualify row_number() over (partition by landing_id order by _landing_file) = 1
)

select * from renamed
{% if is_incremental() %}
where landing_id not in (select landing_id from {{ this }})
{% endif %}
