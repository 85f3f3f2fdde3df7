{#- One row per (memory_id, term): the lexical index over current memories, for BM25 recall.
    Terms come from the tokenize macro (words; Han character bigrams). -#}
with memories as (
    select memory_id, user_id, content
    from {{ ref('int_memories_consolidated') }}
    where valid_to is null
        and memory_id not in (  -- archived or dropped by the retention policy: out of recall
            select memory_id from {{ ref('int_memory_retention') }} where retention_action != 'keep'
        )
),

tokens as (
    select
        memory_id,
        user_id,
        {{ tokenize('content') }} as terms
    from memories
),

per_term as (
    select
        memory_id,
        user_id,
        unnest(terms) as term,
        {{ list_length('terms') }} as doc_len
    from tokens
)

select
    memory_id || ':' || term as term_entry_id,
    memory_id,
    user_id,
    term,
    count(*) as tf,
    any_value(doc_len) as doc_len
from per_term
group by memory_id, user_id, term
order by user_id, term
