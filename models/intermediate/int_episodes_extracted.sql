{#- One row per episode candidate (extraction_id): every accepted message of var episode_roles
    with at least var episode_min_terms lexical terms (tokenize macro), verbatim up to var
    max_episode_chars (the head of a longer message: embedding cost grows with length and e5 was
    trained on 512 tokens), as an 'episode' memory candidate; and every accepted message of var
    assistant_memory_roles that carries a keep marker of seeds/assistant_markers.csv (a
    recommendation, promise or decision, matched in lower case anywhere in the message) and no
    drop marker (an acknowledgement of how to answer), verbatim the same way, as an 'assistant'
    memory candidate: what the assistant said, never a fact about the user. Same columns as
    int_memories_extracted. Incremental on the session log's loaded_at. -#}
{{ config(materialized='incremental', incremental_strategy='append') }}

with new_messages as (
    {{ new_messages_to_extract(ref('int_messages_validated'), string_list_var('episode_roles')) }}
),

messages as (
    select *
    from new_messages
    where {{ list_length(tokenize('content')) }} >= {{ number_var('episode_min_terms') }}
),

{% set assistant_roles = string_list_var('assistant_memory_roles') -%}
markers as (
    select
        pattern,
        keep
    from {{ ref('assistant_markers') }}
),

assistant_messages as (
    {% if assistant_roles | length > 0 -%}
        {{ new_messages_to_extract(ref('int_messages_validated'), assistant_roles) }}
    {%- else -%}
        select
            null::varchar as message_id,
            null::varchar as user_id,
            null::varchar as content,
            null::timestamp as message_at,
            null::timestamp as loaded_at
        where false
    {%- endif %}
),

assistant_said as (
    select a.*
    from assistant_messages as a
    where {{ list_length(tokenize('a.content')) }} >= {{ number_var('episode_min_terms') }}
        and exists (
            select 1 from markers as k
            where k.keep and {{ regexp_search('lower(a.content)', 'k.pattern') }}
        )
        and not exists (
            select 1 from markers as k
            where not k.keep and {{ regexp_search('lower(a.content)', 'k.pattern') }}
        )
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
union all
select
    'ext_' || {{ id_hash(['user_id', 'message_id', "'assistant'"]) }} as extraction_id,
    message_id,
    user_id,
    'assistant' as rule_id,
    'assistant' as kind,
    null::varchar as slot,
    left(trim(content), {{ number_var('max_episode_chars') }}) as content,
    message_at,
    loaded_at
from assistant_said
