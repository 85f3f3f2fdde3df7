{#- One row per distinct (model, form, content): each text is embedded once, ever. Incremental:
    a build embeds only texts it has not seen. Episodes use var embedding_episode_form, other
    memories var embedding_memory_form. -#}
{{ config(materialized='incremental', incremental_strategy='append', indexes=lookup_indexes([['embedding_key']])) }}

with contents as (
    select distinct
        {{ embedding_key('content', 'embedding_form') }} as embedding_key,
        embedding_form,
        content
    from {{ ref('int_memory_candidates') }}
),

new_contents as (
    select *
    from contents
    {% if is_incremental() %}
    where not exists (select 1 from {{ this }} as done where done.embedding_key = contents.embedding_key)
    {% endif %}
)

select
    embedding_key,
    {{ sql_literal(string_var('embedding_model')) }} as embedding_model,
    embedding_form,
    embed(
        content, {{ sql_literal(string_var('embedding_model')) }}, embedding_form
    )::{{ embedding_type() }} as embedding,
    '{{ run_started_at.strftime("%Y-%m-%d %H:%M:%S.%f") }}'::timestamp as embedded_at
from new_contents
