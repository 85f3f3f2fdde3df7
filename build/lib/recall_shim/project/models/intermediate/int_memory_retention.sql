{#- One row per memory: what the retention policy does with it as of the build's as_of time.
    A memory of a kind in var retention_kinds that was neither mentioned nor accessed for var
    retention_days days and whose strength is at var strength_floor gets var retention_action
    ('archive': moved to memory_archive, out of recall; 'drop': out of recall and not kept);
    every other memory is 'keep'. var retention_days null keeps everything. A pure function of
    (events, as_of): a memory mentioned again is reinforced above the floor and comes back. -#}
{%- set days = number_var('retention_days') -%}
{%- set action = choice_var('retention_action') %}
with memories as (
    select memory_id, kind, last_mentioned_at
    from {{ ref('int_memories_consolidated') }}
),

strengths as (
    select memory_id, strength, last_accessed, strength_as_of
    from {{ ref('int_memory_strength') }}
),

aged as (
    select
        m.memory_id,
        m.kind,
        s.strength,
        s.strength_as_of,
        greatest(m.last_mentioned_at, coalesce(s.last_accessed, m.last_mentioned_at)) as last_active_at
    from memories as m
    inner join strengths as s using (memory_id)
)

select
    memory_id,
    last_active_at,
    {% if days is none -%}
        'keep'
    {%- else -%}
    case
        when {{ list_has(text_list_literal(sql_string_list(string_list_var('retention_kinds'))), 'kind') }}
            and last_active_at < strength_as_of - {{ days_interval(days) }}
            and strength <= {{ number_var('strength_floor') }} + 1e-9
        then {{ sql_literal(action) }}
        else 'keep'
    end
    {%- endif %} as retention_action
from aged
