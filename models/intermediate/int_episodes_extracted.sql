{#- One row per episode candidate (extraction_id): every accepted message of var episode_roles
    with at least var episode_min_terms lexical terms (tokenize macro), verbatim, as an 'episode' memory candidate.
    Same columns as int_memories_extracted. Incremental on the session log's loaded_at. -#}
{{ config(materialized='incremental', incremental_strategy='append') }}

with messages as (
    select
        m.message_id,
        m.user_id,
        m.content,
        m.message_at,
        l.loaded_at
    from {{ ref('session_messages') }} as m
    inner join {{ ref('session_log') }} as l using (landing_id)
    where m.role in ({{ sql_string_list(var('episode_roles')) }})
        and len({{ tokenize('m.content') }}) >= {{ var('episode_min_terms') }}
    {% if is_incremental() %}
      and l.loaded_at > (select coalesce(max(loaded_at), '-infinity'::timestamp) from {{ this }})
    {% endif %}
)

select
    md5(concat_ws('|', message_id, 'episode')) as extraction_id,
    message_id,
    user_id,
    'episode' as rule_id,
    'episode' as kind,
    null::varchar as slot,
    trim(content) as content,
    message_at,
    loaded_at
from messages
