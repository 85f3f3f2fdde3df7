{#- One row per episode candidate (extraction_id): every accepted message of var episode_roles
    with at least var episode_min_terms lexical terms (tokenize macro), verbatim up to var
    max_episode_chars (the head of a longer message: embedding cost grows with length and e5 was
    trained on 512 tokens), as an 'episode' memory candidate. Same columns as
    int_memories_extracted. Incremental on the session log's loaded_at. -#}
{{ config(materialized='incremental', incremental_strategy='append') }}

with new_messages as (
    {{ new_messages_to_extract(ref('int_messages_validated'), string_list_var('episode_roles')) }}
),

messages as (
    select *
    from new_messages
    where {{ list_length(tokenize('content')) }} >= {{ number_var('episode_min_terms') }}
)

select
    'ext_' || {{ id_hash(['user_id', 'message_id', "'episode'"]) }} as extraction_id,
    message_id,
    user_id,
    'episode' as rule_id,
    'episode' as kind,
    null::varchar as slot,
    left(trim(content), {{ number_var('max_episode_chars') }}) as content,
    message_at,
    loaded_at
from messages
