{#- One row per (user_id, term): document frequency of the term among the user's current
    memories, with the user's memory count and average memory length, for BM25 (recall is per
    user, so statistics are per user). -#}
with docs as (
    select
        user_id,
        count(distinct memory_id) as n_docs,
        avg(doc_len) as avg_doc_len
    from (select distinct user_id, memory_id, doc_len from {{ ref('memory_term_index') }})
    group by user_id
),

dfs as (
    select
        user_id,
        term,
        count(*) as df
    from {{ ref('memory_term_index') }}
    group by user_id, term
)

select
    dfs.user_id || ':' || dfs.term as term_stat_id,
    dfs.user_id,
    dfs.term,
    dfs.df,
    docs.n_docs,
    docs.avg_doc_len
from dfs
inner join docs using (user_id)
order by dfs.user_id, dfs.term
