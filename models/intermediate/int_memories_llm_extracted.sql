{#- One row per (LLM-extracted memory, source message): candidate memories from the batches the
    LLM endpoint answered, in the columns of int_memories_extracted (rule_id = 'llm:<model>'),
    so consolidation treats them like rule candidates. Empty while LLM extraction is off. -#}
with batches as (
    select *
    from {{ ref('int_llm_extraction_batches') }}
    where status = 'ok'
),

items as (
    select
        b.batch_id,
        b.user_id,
        b.llm_model,
        b.attempted_at,
        unnest(from_json(
            b.memories_json,
            '[{"kind": "VARCHAR", "content": "VARCHAR", "slot": "VARCHAR", "source_message_ids": ["VARCHAR"]}]'
        )) as item
    from batches as b
),

per_source as (
    -- item is a struct column: i.item.kind etc. are fields, not tables (hence the noqa: RF01)
    select
        i.user_id,
        i.llm_model,
        i.attempted_at,
        i.item.kind,  -- noqa: RF01
        i.item.slot,  -- noqa: RF01
        i.item.content,  -- noqa: RF01
        unnest(i.item.source_message_ids) as message_id  -- noqa: RF01
    from items as i
),

messages as (
    select *
    from {{ ref('int_messages_validated') }}
    where reject_reason is null
)

select
    'ext_' || {{ id_hash(["'llm'", 'm.user_id', 'p.message_id', 'p.kind', 'p.content']) }} as extraction_id,
    p.message_id,
    m.user_id,
    'llm:' || coalesce(nullif(p.llm_model, ''), 'default') as rule_id,
    p.kind,
    p.slot,
    p.content,
    m.message_at,
    p.attempted_at as loaded_at
from per_source as p
inner join messages as m
    on
        m.message_id = p.message_id
        and m.user_id = p.user_id
qualify row_number() over (partition by m.user_id, p.message_id, p.kind, p.content order by p.attempted_at) = 1
