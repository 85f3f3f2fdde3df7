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
{%- set assistant_roles = string_list_var('assistant_memory_roles') %}

{{ episode_extractions(
    '(' ~ new_messages_to_extract(ref('int_messages_validated'), string_list_var('episode_roles')) ~ ')',
    '(' ~ new_messages_to_extract(ref('int_messages_validated'), assistant_roles) ~ ')'
        if assistant_roles | length > 0 else none,
    ref('assistant_markers')
) }}
