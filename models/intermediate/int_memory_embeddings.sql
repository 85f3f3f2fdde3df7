{#- One row per distinct (model, form, content): each text is embedded once, ever. Incremental:
    a build embeds only content it has not seen. -#}
{{ config(materialized='incremental', incremental_strategy='append') }}

with contents as (
    select distinct
        {{ embedding_key('content') }} as embedding_key,
        content
    from {{ ref('int_memories_consolidated') }}
),

new_contents as (
    select *
    from contents
    {% if is_incremental() %}
    where embedding_key not in (select embedding_key from {{ this }})
    {% endif %}
)

select
    embedding_key,
    '{{ var("embedding_model") }}' as embedding_model,
    '{{ var("embedding_memory_form") }}' as embedding_form,
    {{ embed_sql('content', var('embedding_memory_form')) }} as embedding,
    '{{ run_started_at.strftime("%Y-%m-%d %H:%M:%S.%f") }}'::timestamp as embedded_at
from new_contents
