{#- One row per memory: candidates of one user and kind whose normalised content is the same
    are one memory, with every source message as provenance. In a slot, a newer memory
    supersedes the older (valid_to set), which stays here for history. Memories forgotten by id
    (stg_forget_requests) never come back. -#}
with candidates as (
    select
        *,
        lower(regexp_replace(trim(content), '\s+', ' ', 'g')) as normalised_content
    from {{ ref('int_memories_extracted') }}
),

grouped as (
    select
        'mem_' || md5(concat_ws('|', user_id, kind, normalised_content)) as memory_id,
        user_id,
        kind,
        any_value(slot order by message_at desc) as slot,
        arg_min(content, message_at) as content,
        min(message_at) as created_at,
        max(message_at) as last_mentioned_at,
        count(distinct message_id) as mention_count,
        list(distinct message_id order by message_id) as source_message_ids,
        list(message_at order by message_at) as mentioned_at
    from candidates
    group by user_id, kind, normalised_content
),

superseded as (
    select
        *,
        case when slot is not null then
            lead(last_mentioned_at) over (
                partition by user_id, slot order by last_mentioned_at, memory_id
            )
        end as valid_to
    from grouped
    where not {{ is_forgotten_memory('memory_id') }}
)

select
    memory_id,
    user_id,
    kind,
    slot,
    content,
    created_at,
    last_mentioned_at,
    mention_count,
    source_message_ids,
    mentioned_at,
    created_at as valid_from,
    valid_to
from superseded
