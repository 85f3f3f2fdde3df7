{#- One row per candidate memory (candidate_id = 'mem_' + md5 of user, kind and normalised
    content): rule extractions, LLM extractions and episodes whose normalised text is identical are one candidate
    with every source message. Near-duplicates are merged later (int_memories_consolidated). -#}
with extractions as (
    select * from {{ ref('int_memories_extracted') }}
    union all by name
    select * from {{ ref('int_memories_llm_extracted') }}
    union all by name
    select * from {{ ref('int_episodes_extracted') }}
),

normalised as (
    select
        *,
        lower(regexp_replace(trim(content), '\s+', ' ', 'g')) as normalised_content
    from extractions
)

select
    'mem_' || md5(concat_ws('|', user_id, kind, normalised_content)) as candidate_id,
    user_id,
    kind,
    any_value(slot order by message_at desc) as slot,
    arg_min(content, message_at) as content,
    {{ embedding_form_for_kind('kind') }} as embedding_form,
    min(message_at) as created_at,
    max(message_at) as last_mentioned_at,
    list(distinct message_id order by message_id) as source_message_ids,
    list(message_at order by message_at) as mentioned_at
from normalised
group by user_id, kind, normalised_content
