{#- One row per candidate memory (candidate_id = 'mem_' + md5 of user, kind and normalised
    content): rule extractions, LLM extractions and episodes whose normalised text is identical are one candidate
    with every source message. Near-duplicates are merged later (int_memories_consolidated). -#}
with extractions as (
    select extraction_id, message_id, user_id, rule_id, kind, slot, content, message_at, loaded_at
    from {{ ref('int_memories_extracted') }}
    union all
    -- LLM extraction (a dbt Python model) runs on the DuckDB target only
    {% if target.type == 'duckdb' %}
        select extraction_id, message_id, user_id, rule_id, kind, slot, content, message_at, loaded_at
        from {{ ref('int_memories_llm_extracted') }}
        union all
    {% endif %}
    select extraction_id, message_id, user_id, rule_id, kind, slot, content, message_at, loaded_at
    from {{ ref('int_episodes_extracted') }}
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
    {{ first_agg('slot', 'message_at desc') }} as slot,
    {{ arg_min_agg('content', 'message_at') }} as content,
    {{ embedding_form_for_kind('kind') }} as embedding_form,
    min(message_at) as created_at,
    max(message_at) as last_mentioned_at,
    {{ list_agg('message_id', 'message_id', distinct=true) }} as source_message_ids,
    {{ list_agg('message_at', 'message_at') }} as mentioned_at
from normalised
group by user_id, kind, normalised_content
