-- LLM extraction cost and health per build.
-- One row per build that called the LLM endpoint: batches answered and failed, tokens in and
-- out, and running totals. Empty while LLM extraction is off (docs/llm_extraction.md).
select
    built_at,
    llm_model,
    batches_ok,
    batches_failed,
    requests,
    messages_sent,
    memories_kept,
    memories_rejected,
    prompt_tokens,
    completion_tokens,
    sum(prompt_tokens) over (order by built_at) as prompt_tokens_to_date,
    sum(completion_tokens) over (order by built_at) as completion_tokens_to_date
from {{ ref('llm_token_ledger') }}
order by built_at
