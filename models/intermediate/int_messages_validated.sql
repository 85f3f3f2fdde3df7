{#- One row per landed row, typed, with its message_id resolved and the first reason it is
    rejected (NULL when it is accepted). Incremental on the session log's loaded_at: a build
    types only the rows it loaded. A message is (user_id, message_id): ids are unique per user,
    so two users' "1" are two messages. A row is a duplicate_message_id when an earlier build
    accepted the same (user_id, message_id), or when an earlier row of the same build has it:
    the first row wins, in landing order (landed_at, landing file) then position in the file
    (landing_seq; landing_id for files landed before it was written), deterministically.
    A row without message_id gets a hash of the row (macros/identity.sql): the legacy hash in a
    store that already holds such ids, else the unambiguous one. -#}
{{ config(
    materialized='incremental', incremental_strategy='append',
    indexes=lookup_indexes([['loaded_at'], ['message_id']]),
) }}

with legacy_scheme as (
    {% if is_incremental() -%}
        select exists (select 1 from {{ this }} where left(message_id, 2) = 'm_') as legacy_ids
    {%- else -%}
        select false as legacy_ids
    {%- endif %}
),

landed as (
    select * from {{ ref('session_log') }}
    {% if is_incremental() %}
        where loaded_at > (select coalesce(max(loaded_at), '-infinity'::timestamp) from {{ this }})
    {% endif %}
),

typed as (
    select {{ typed_landed_columns('l.legacy_ids') }}
    from landed
    cross join legacy_scheme as l
),

checked as (
    select
        *,
        {{ landed_row_reject_reason() }} as row_reject_reason
    from typed
),

deduplicated as (
    select
        *,
        row_number() over (
            partition by user_id, message_id, row_reject_reason is null
            order by landed_at, landing_file, landing_seq, landing_id
        ) as id_occurrence
    from checked
),

seen_before as (
    {% if is_incremental() %}
        select distinct user_id, message_id
        from {{ this }}
        where reject_reason is null
            and message_id in (select c.message_id from checked as c)
    {% else %}
        select
            null::varchar as user_id,
            null::varchar as message_id
        where false
    {% endif %}
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
    message_at,
    message_id,
    landed_at,
    ts_raw,
    msg_seq_raw,
    landing_file,
    loaded_at,
    coalesce(
        row_reject_reason,
        case
            when id_occurrence > 1 then 'duplicate_message_id'
            when exists (
                    select 1 from seen_before as s where s.user_id = d.user_id and s.message_id = d.message_id
                ) then 'duplicate_message_id'
        end
    ) as reject_reason
from deduplicated as d
