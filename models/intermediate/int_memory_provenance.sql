{#- One row per memory: the sessions and agents its source messages came from, for recall's
    optional narrower scopes (agent_id, session_id). Incremental (delete+insert on memory_id):
    only memories int_memories_consolidated wrote since the last run (consolidated_at). A source
    message is (user_id, message_id): another user's message with the same id is not a source.
    turn_session_id / turn_seq: the session and msg_seq of its first source message (by message_at,
    then message_id), the turn recall's turn context places it at (macros/recall.sql,
    turn_context_ctes; docs/recall.md "Turn context"). -#}
{{ config(
    materialized='incremental', incremental_strategy='delete+insert', unique_key='memory_id',
    on_schema_change='append_new_columns',
    indexes=lookup_indexes([['memory_id'], ['consolidated_at']]),
) }}

with sources as (
    select
        memory_id,
        user_id,
        consolidated_at,
        unnest(source_message_ids) as message_id
    from {{ ref('int_memories_consolidated') }}
    {% if is_incremental() %}
        where consolidated_at > (select coalesce(max(p.consolidated_at), '-infinity'::timestamp) from {{ this }} as p)
    {% endif %}
),

source_messages as (
    select
        s.memory_id,
        m.message_id,
        m.session_id,
        m.agent_id,
        m.msg_seq,
        s.consolidated_at,
        row_number() over (partition by s.memory_id order by m.message_at, m.message_id) as source_rank
    from sources as s
    inner join {{ ref('int_messages_validated') }} as m
        on m.user_id = s.user_id and m.message_id = s.message_id and m.reject_reason is null
)

select
    m.memory_id,
    coalesce(
        {{ list_agg('m.session_id', 'm.session_id', distinct=true) }} filter (where m.session_id is not null),
        {{ text_list_literal('') }}
    ) as session_ids,
    coalesce(
        {{ list_agg('m.agent_id', 'm.agent_id', distinct=true) }} filter (where m.agent_id is not null),
        {{ text_list_literal('') }}
    ) as agent_ids,
    max(case when m.source_rank = 1 then m.session_id end) as turn_session_id,
    max(case when m.source_rank = 1 then m.msg_seq end) as turn_seq,
    max(m.consolidated_at) as consolidated_at
from source_messages as m
group by m.memory_id
