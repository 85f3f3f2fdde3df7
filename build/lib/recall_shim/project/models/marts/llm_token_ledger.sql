{#- One row per build that called the LLM extraction endpoint (build_id): batches sent, answered
    and failed, messages sent, memories kept and rejected, tokens in and out. -#}
with batches as (
    select * from {{ ref('int_llm_extraction_batches') }}
)

select
    build_id,
    min(attempted_at) as built_at,
    any_value(llm_model) as llm_model,
    count(*) as batches,
    count(*) filter (where status = 'ok') as batches_ok,
    count(*) filter (where status = 'failed') as batches_failed,
    sum(attempts) as requests,
    sum(len(message_ids)) as messages_sent,
    sum(json_array_length(memories_json)) as memories_kept,
    sum(json_array_length(rejected_json)) as memories_rejected,
    sum(prompt_tokens) as prompt_tokens,
    sum(completion_tokens) as completion_tokens,
    sum(prompt_tokens + completion_tokens) as total_tokens
from batches
group by build_id
