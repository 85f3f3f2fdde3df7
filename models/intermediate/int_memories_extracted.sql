{#- One row per (message sentence, kind) that an extraction rule matched: a candidate memory.
    Incremental: only messages loaded since the last run are read, so old messages are never
    re-extracted (edit rules -> rebuild this model with --full-refresh). extraction_id is
    unambiguous over (user_id, message_id, kind, content) (macros/identity.sql; ids of earlier
    versions, a bare md5, stay as they are and cannot equal a new 'ext_' id). -#}
{{ config(materialized='incremental', incremental_strategy='append') }}

with messages as (
    {{ new_messages_to_extract(ref('int_messages_validated'), string_list_var('extract_roles')) }}
),

sentences as (
    select
        message_id,
        user_id,
        message_at,
        loaded_at,
        trim(sentence) as sentence
    from messages,
        unnest(regexp_split_to_array(content, '[.!?;。！？；\n]+')) as s (sentence)
    where length(trim(sentence)) > 1
        and length(sentence) <= {{ number_var('max_memory_chars') }}
),

rules as (
    select * from {{ ref('extraction_rules') }}
),

matched as (
    select
        s.message_id,
        s.user_id,
        s.message_at,
        s.loaded_at,
        r.rule_id,
        r.kind,
        nullif(r.slot, '') as slot,
        trim(regexp_replace(s.sentence, r.pattern, r.template)) as content,
        row_number() over (
            partition by s.user_id, s.message_id, s.sentence, r.kind order by r.priority, r.rule_id
        ) as rule_rank
    from sentences as s
    inner join rules as r on {{ regexp_full_match('s.sentence', 'r.pattern') }}
),

best_rule as (
    select
        *,
        row_number() over (partition by user_id, message_id, kind, content order by rule_id) as content_rank
    from matched
    where rule_rank = 1
)

select
    'ext_' || {{ id_hash(['user_id', 'message_id', 'kind', 'content']) }} as extraction_id,
    message_id,
    user_id,
    rule_id,
    kind,
    slot,
    content,
    message_at,
    loaded_at
from best_rule
where content_rank = 1
