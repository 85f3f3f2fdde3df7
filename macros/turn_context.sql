{#- Turn context (docs/recall.md "Turn context"): a memory's lexical leg adds the BM25 of the
    episodes of its session's neighbouring turns, at var lexical_context_prev_weight (the turn
    before) and var lexical_context_next_weight (the turn after). An answer ("a sunset, it calms
    me") is often found through the question asked just before it. A memory's turn is its first
    source message's (turn_session_id, turn_seq: int_memory_provenance); its neighbours are the
    user's current episodes of the nearest earlier and the nearest later turn of that session
    that holds one. Only the neighbour's own BM25 is lent, at query time: no terms are copied,
    so forgetting a message takes its share with it. Both weights 0: off. -#}
{% macro turn_context_on() -%}
{{ return(number_var('lexical_context_prev_weight') > 0 or number_var('lexical_context_next_weight') > 0) }}
{%- endmacro %}

{#- Each term-index match of one user's memories with its BM25 per intent: query_terms a relation
    of (intent_id, term); terms, term_stats, user_id as in recall_sql; only: a relation whose
    memory_ids the matches are limited to (none: every memory of the user). -#}
{% macro lexical_own_sql(query_terms, terms, term_stats, user_id, only=none) -%}
select
        qt.intent_id,
        t.memory_id,
        sum({{ bm25_term('t.tf', 't.doc_len', 's.avg_doc_len', 's.n_docs', 's.df') }}) as lexical_score
    from {{ query_terms }} as qt
    inner join {{ term_stats }} as s
        on s.user_id = {{ user_id }} and s.term = qt.term
    inner join {{ terms }} as t
        on t.user_id = {{ user_id }} and t.term = qt.term
    {%- if only is not none %}
    where t.memory_id in (select memory_id from {{ only }})
    {%- endif %}
    group by qt.intent_id, t.memory_id
{%- endmacro %}

{#- CTEs turn_memories, turn_steps and turn_links (memory_id, neighbour_id, weight): the neighbour
    episodes of each memory of relation receivers (memory_id, user_id, turn_session_id, turn_seq),
    among the memories of relation memories (long_term_memory's columns memory_id, user_id, kind,
    valid_to, turn_session_id, turn_seq); user_id: SQL expression of one user, or none (every
    user). -#}
{% macro turn_context_ctes(memories, receivers, user_id=none) -%}
{%- set prev_w = number_var('lexical_context_prev_weight') -%}
{%- set next_w = number_var('lexical_context_next_weight') -%}
turn_memories as (
    select memory_id, user_id, kind, valid_to, turn_session_id, turn_seq
    from {{ memories }}
    where turn_session_id is not null
        and turn_seq is not null
        {%- if user_id is not none %}
        and user_id = {{ user_id }}
        {%- endif %}
),

-- per turn of a session: the nearest earlier and later turn that holds a current episode
turn_steps as (
    select
        user_id,
        turn_session_id,
        turn_seq,
        max(case when held then turn_seq end) over (
            partition by user_id, turn_session_id order by turn_seq rows between unbounded preceding and 1 preceding
        ) as prev_seq,
        min(case when held then turn_seq end) over (
            partition by user_id, turn_session_id order by turn_seq rows between 1 following and unbounded following
        ) as next_seq
    from (
        select user_id, turn_session_id, turn_seq, bool_or(kind = 'episode' and valid_to is null) as held
        from turn_memories
        group by user_id, turn_session_id, turn_seq
    ) as turns
),

turn_links as (
    select
        r.user_id,
        r.memory_id,
        e.memory_id as neighbour_id,
        case when e.turn_seq < r.turn_seq then {{ prev_w }} else {{ next_w }} end::{{ double_type() }} as weight
    from {{ receivers }} as r
    inner join turn_steps as s
        on s.user_id = r.user_id and s.turn_session_id = r.turn_session_id and s.turn_seq = r.turn_seq
    inner join turn_memories as e
        on e.user_id = r.user_id
            and e.turn_session_id = r.turn_session_id
            and e.kind = 'episode'
            and e.valid_to is null
            and (
                {%- if prev_w > 0 %} e.turn_seq = s.prev_seq{% else %} false{% endif %}
                or {%- if next_w > 0 %} e.turn_seq = s.next_seq{% else %} false{% endif %}
            )
)
{%- endmacro %}

{#- The turn links of every current memory of relation memories (user_id, memory_id, neighbour_id, weight,
    and the serving index's row keys id64 / neighbour_id64: md5_number_upper(memory_id) >> 2,
    DuckDB), for the serving index and the hot tail (recall_shim/serving/context.py), which add
    the same shares to the BM25 they compute. -#}
{% macro turn_links_sql(memories) -%}
with {{ turn_context_ctes(memories, '(select * from ' ~ memories ~ ' where valid_to is null)') }}

select
    user_id,
    memory_id,
    neighbour_id,
    weight,
    (md5_number_upper(memory_id) >> 2)::bigint as id64,
    (md5_number_upper(neighbour_id) >> 2)::bigint as neighbour_id64
from turn_links
order by neighbour_id64, id64
{%- endmacro %}
