{#- Tokenisation shared by the term index and the recall query, so both sides agree.
    text_expr: a VARCHAR expression. Returns VARCHAR[]: lower-cased letter/digit words for
    non-Han text (stopwords of var lexical_stopwords removed, then plural/possessive endings
    stripped: plural_cut, then -ed / -ing endings: stem_cut, stem_fix) plus overlapping character
    bigrams of every Han run (a lone Han character is kept as a unigram). -#}
{% macro tokenize(text_expr) -%}
  {{ return(adapter.dispatch('tokenize')(text_expr)) }}
{%- endmacro %}

{#- The plural / possessive ending of a word: dogs -> dog, cities -> city, lena's -> lena. -#}
{% macro plural_cut(w) -%}
case
    when length({{ w }}) > 4 and {{ w }} like '%ies' then left({{ w }}, -3) || 'y'
    when length({{ w }}) > 3 and {{ w }} like '%s' and {{ w }} not like '%ss' and {{ w }} not like '%us' then left({{ w }}, -1)
    else {{ w }}
end
{%- endmacro %}

{#- The -ed / -ing ending of a word (after the plural rule), so "surfed", "surfing" and "surf" are
    one term, as are "hiking" / "hike", "running" / "run", "tried" / "try". stem_cut: -ied -> y
    (5+ letters); -ing (6+ letters) and -ed (5+ letters, not -eed) are cut when the rest holds a
    vowel (a, e, i, o, u, y), the cut stem marked with '#' (never in a word). stem_fix: a marked
    stem ends as a word would: a doubled b, d, g, m, n, p, r or t is undoubled (runn -> run); a
    stem ending in iv, nc, rc, uc, ic or bl, or shaped consonants, one vowel, one consonant other
    than w, x, y (mak, hik, liv), gets its e back. Both dialects render plural_cut, stem_cut and
    stem_fix; recall_shim/serving/terms.py repeats them for the query fast path (tests_py/test_hybrid_index.py
    checks that they agree). -#}
{% macro stem_cut(w) -%}
case
    when length({{ w }}) >= 5 and {{ w }} like '%ied' then left({{ w }}, -3) || 'y'
    when length({{ w }}) >= 6 and {{ w }} like '%ing' and {{ regexp_search('left(' ~ w ~ ', -3)', "'[aeiouy]'") }}
        then left({{ w }}, -3) || '#'
    when length({{ w }}) >= 5 and {{ w }} like '%ed' and {{ w }} not like '%eed'
        and {{ regexp_search('left(' ~ w ~ ', -2)', "'[aeiouy]'") }}
        then left({{ w }}, -2) || '#'
    else {{ w }}
end
{%- endmacro %}

{% macro stem_fix(c) -%}
{%- set s = 'left(' ~ c ~ ', -1)' -%}
case
    when {{ c }} not like '%#' then {{ c }}
    when {{ regexp_search(s, "'(bb|dd|gg|mm|nn|pp|rr|tt)$'") }} then left({{ s }}, -1)
    when {{ regexp_search(s, "'(iv|nc|rc|uc|ic|bl)$'") }} or {{ regexp_search(s, "'^[^aeiou]*[aeiou][^aeiouwxy]$'") }}
        then {{ s }} || 'e'
    else {{ s }}
end
{%- endmacro %}

{#- PostgreSQL: the same terms as a text[] (order aside). Han: U+2E80-2FDF, 3005, 3007, 3021-3029,
    3038-303B, 3400-4DBF, 4E00-9FFF, F900-FAFF and planes 2-3; words are [[:alnum:]] runs, which
    are Unicode-aware when the database's LC_CTYPE is a UTF-8 locale (recall_shim/targets/postgres/server.py uses C.UTF-8). -#}
{% macro postgres__tokenize(text_expr) -%}
{%- set han = '[\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]' -%}
array(
    select {{ stem_fix('c') }}
    from (
        select {{ stem_cut('p') }} as c
        from (
            select {{ plural_cut('w') }} as p
            from (
                select (regexp_matches(lower(regexp_replace({{ text_expr }}, '{{ han }}', ' ', 'g')), '[[:alnum:]]+', 'g'))[1] as w
            ) as words
            where w <> all(array[{{ sql_string_list(string_list_var('lexical_stopwords')) }}])
        ) as plurals
    ) as cuts
    union all
    select substr(run, i, 2)
    from (select (regexp_matches({{ text_expr }}, '{{ han }}+', 'g'))[1] as run) as runs,
        generate_series(1, greatest(length(run) - 1, 1)) as i
)
{%- endmacro %}

{% macro duckdb__tokenize(text_expr) -%}
list_concat(
    list_transform(list_transform(list_transform(
        list_filter(
            regexp_extract_all(lower(regexp_replace({{ text_expr }}, '\p{Han}', ' ', 'g')), '[\p{L}\p{N}]+'),
            lambda w: not list_contains([{{ sql_string_list(string_list_var('lexical_stopwords')) }}]::varchar[], w)
        ),
        lambda w: {{ plural_cut('w') }}
    ), lambda p: {{ stem_cut('p') }}), lambda c: {{ stem_fix('c') }}),
    flatten(list_transform(
        regexp_extract_all({{ text_expr }}, '\p{Han}+'),
        lambda run: case
            when length(run) = 1 then [run]
            else list_transform(range(1, length(run)), lambda i: substr(run, i, 2))
        end
    ))
)
{%- endmacro %}

{#- BM25 term weight. tf: term frequency in the memory, doc_len: memory length in terms,
    avg_doc_len / n_docs / df: the user's current memories. k1, b: vars lexical_k1, lexical_b. -#}
{% macro bm25_term(tf, doc_len, avg_doc_len, n_docs, df) -%}
{%- set k1 = number_var('lexical_k1') -%}
{%- set b = number_var('lexical_b') -%}
ln(1 + ({{ n_docs }} - {{ df }} + 0.5) / ({{ df }} + 0.5))
    * ({{ tf }} * ({{ k1 }} + 1))
    / ({{ tf }} + {{ k1 }} * (1 - {{ b }} + {{ b }} * {{ doc_len }} / nullif({{ avg_doc_len }}, 0)))
{%- endmacro %}

{#- memory_term_index's rows (one per (memory_id, term): tf, doc_len) of the memories relation
    (memory_id, user_id, content, consolidated_at), by the tokenize macro. Shared by the model
    and the hot tail's statement (macros/tail.sql). -#}
{% macro memory_term_rows(memories) -%}
with tokens as (
    select
        memory_id,
        user_id,
        consolidated_at,
        {{ tokenize('content') }} as terms
    from {{ memories }}
),

per_term as (
    select
        memory_id,
        user_id,
        consolidated_at,
        unnest(terms) as term,
        {{ list_length('terms') }} as doc_len
    from tokens
)

select
    memory_id || ':' || term as term_entry_id,
    memory_id,
    user_id,
    term,
    count(*) as tf,
    any_value(doc_len) as doc_len,
    any_value(consolidated_at) as consolidated_at
from per_term
group by memory_id, user_id, term
{%- endmacro %}

{#- memory_term_stats' rows (one per (user_id, term): df, n_docs, avg_doc_len) over index_rows
    (memory_term_index rows: memory_id, user_id, term, doc_len) of whole users; computed_at is
    a SQL timestamp expression. Shared by the model and the hot tail, which recomputes a user's
    statistics over the snapshot's and the tail's rows (macros/tail.sql). -#}
{% macro memory_term_stats_rows(index_rows, computed_at) -%}
with docs as (
    select
        user_id,
        count(distinct memory_id) as n_docs,
        avg(doc_len) as avg_doc_len
    from (select distinct user_id, memory_id, doc_len from {{ index_rows }}) as per_doc
    group by user_id
),

dfs as (
    select
        user_id,
        term,
        count(*) as df
    from {{ index_rows }}
    group by user_id, term
)

select
    dfs.user_id || ':' || dfs.term as term_stat_id,
    dfs.user_id,
    dfs.term,
    dfs.df,
    docs.n_docs,
    docs.avg_doc_len,
    {{ computed_at }} as computed_at
from dfs
inner join docs using (user_id)
{%- endmacro %}
