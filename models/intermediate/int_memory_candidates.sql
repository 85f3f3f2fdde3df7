{#- One row per candidate memory (candidate_id: memory_id_key of user, kind and normalised
    content, macros/identity.sql; a store whose candidates have legacy 'mem_' ids keeps making
    legacy ids until a --full-refresh, docs/data_protection.md): rule extractions, LLM extractions and episodes whose normalised text is identical are one candidate
    with every source message. Near-duplicates are merged later (int_memories_consolidated).
    Incremental (delete+insert on candidate_id): a build aggregates only the extractions loaded
    since its last run and folds them into the existing candidate rows (earliest content, slot of
    the latest mention, union of sources and mentions). loaded_at is the run that last changed the
    row; reordered marks a row whose created_at moved earlier in that run (consolidation then
    recomputes the user). Owners of memories forgotten since the last run are rebuilt from all
    their extractions (forget removed their candidates, docs/data_protection.md). -#}
{{ config(
    materialized='incremental',
    incremental_strategy='delete+insert',
    unique_key='candidate_id',
    indexes=lookup_indexes([['candidate_id'], ['loaded_at'], ['user_id']]),
) }}
-- depends_on: {{ ref('stg_forget_requests') }}

with extractions as (
    select
        extraction_id, message_id, user_id, rule_id, kind, slot, entity, polarity, content, happened_on,
        happened_grain, message_at, loaded_at
    from {{ ref('int_memories_extracted') }}
    union all
    -- LLM extraction (a dbt Python model) runs on the DuckDB target only
    {% if target.type == 'duckdb' %}
        select
            extraction_id, message_id, user_id, rule_id, kind, slot, null as entity, null as polarity, content,
            null::date as happened_on, null as happened_grain, message_at, loaded_at
        from {{ ref('int_memories_llm_extracted') }}
        union all
    {% endif %}
    select
        extraction_id, message_id, user_id, rule_id, kind, slot, null as entity, null as polarity, content,
        null::date as happened_on, null as happened_grain, message_at, loaded_at
    from {{ ref('int_episodes_extracted') }}
),

{% if is_incremental() %}
last_run as (
    select coalesce(max(loaded_at), '-infinity'::timestamp) as loaded_at from {{ this }}
),

id_scheme as (
    select exists (select 1 from {{ this }} as o where {{ is_legacy_memory_id('o.candidate_id') }}) as legacy_ids
),

rebuilt_users as (
    select distinct f.user_id
    from {{ ref('stg_forget_requests') }} as f
    where f.scope = 'memory' and f.forgotten_at > (select lr.loaded_at from last_run as lr)
),

{% endif %}
new_extractions as (
    select *
    from extractions
    {% if is_incremental() %}
        where loaded_at > (select lr.loaded_at from last_run as lr)
            or user_id in (select ru.user_id from rebuilt_users as ru)
    {% endif %}
),

normalised as (
    select
        *,
        {{ normalised_content('content') }} as normalised_content
    from new_extractions
),

fresh as (
    select
        {% if is_incremental() -%}
            case
                when (select s.legacy_ids from id_scheme as s)
                    then {{ legacy_memory_id_key('user_id', 'kind', 'normalised_content') }}
                else {{ memory_id_key('user_id', 'kind', 'normalised_content') }}
            end
        {%- else -%}
            {{ memory_id_key('user_id', 'kind', 'normalised_content') }}
        {%- endif %} as candidate_id,
        user_id,
        kind,
        {{ first_agg('slot', 'message_at desc') }} as slot,
        {{ first_agg('entity', 'message_at desc') }} as entity,
        {{ first_agg('polarity', 'message_at desc') }} as polarity,
        {{ arg_min_agg('content', 'message_at') }} as content,
        {{ first_agg('happened_on', 'message_at') }} as happened_on,
        {{ first_agg('happened_grain', 'message_at') }} as happened_grain,
        {{ embedding_form_for_kind('kind') }} as embedding_form,
        min(message_at) as created_at,
        max(message_at) as last_mentioned_at,
        {{ list_agg('message_id', 'message_id', distinct=true) }} as source_message_ids,
        {{ list_agg('message_at', 'message_at') }} as mentioned_at
    from normalised
    group by user_id, kind, normalised_content
)

{% if is_incremental() %}
    select
        f.candidate_id,
        f.user_id,
        f.kind,
        case
            when o.candidate_id is null or f.last_mentioned_at >= o.last_mentioned_at then f.slot
            else o.slot
        end as slot,
        case
            when o.candidate_id is null or f.last_mentioned_at >= o.last_mentioned_at then f.entity
            else o.entity
        end as entity,
        case
            when o.candidate_id is null or f.last_mentioned_at >= o.last_mentioned_at then f.polarity
            else o.polarity
        end as polarity,
        case when o.candidate_id is null or f.created_at < o.created_at then f.content else o.content end as content,
        case when o.candidate_id is null or f.created_at < o.created_at then f.happened_on else o.happened_on end as happened_on,
        case
            when o.candidate_id is null or f.created_at < o.created_at then f.happened_grain else o.happened_grain
        end as happened_grain,
        f.embedding_form,
        case when o.candidate_id is null then f.created_at else least(f.created_at, o.created_at) end as created_at,
        case
            when o.candidate_id is null then f.last_mentioned_at
            else greatest(f.last_mentioned_at, o.last_mentioned_at)
        end as last_mentioned_at,
        case
            when o.candidate_id is null then f.source_message_ids
            else {{ list_merge_sorted('o.source_message_ids', 'f.source_message_ids', distinct=true) }}
        end as source_message_ids,
        case
            when o.candidate_id is null then f.mentioned_at
            else {{ list_merge_sorted('o.mentioned_at', 'f.mentioned_at') }}
        end as mentioned_at,
        '{{ run_started_at.strftime("%Y-%m-%d %H:%M:%S.%f") }}'::timestamp as loaded_at,
        coalesce(f.created_at < o.created_at, false) as reordered
    from fresh as f
    left join {{ this }} as o
        on
            o.candidate_id = f.candidate_id
            and f.user_id not in (select ru.user_id from rebuilt_users as ru)
{% else %}
    select
        *,
        '{{ run_started_at.strftime("%Y-%m-%d %H:%M:%S.%f") }}'::timestamp as loaded_at,
        false as reordered
    from fresh
{% endif %}
