{#- Tokenisation shared by the term index and the recall query, so both sides agree.
    text_expr: a VARCHAR expression. Returns VARCHAR[]: lower-cased letter/digit words for
    non-Han text (stopwords of var lexical_stopwords removed, then plural/possessive endings
    stripped: dogs -> dog, cities -> city, lena's -> lena) plus overlapping character bigrams
    of every Han run (a lone Han character is kept as a unigram). -#}
{% macro tokenize(text_expr) -%}
list_concat(
    list_transform(
        list_filter(
            regexp_extract_all(lower(regexp_replace({{ text_expr }}, '\p{Han}', ' ', 'g')), '[\p{L}\p{N}]+'),
            lambda w: not list_contains([
                {%- for w in var('lexical_stopwords') %}'{{ w | replace("'", "''") }}'{{ ", " if not loop.last }}{% endfor -%}
            ], w)
        ),
        lambda w: case
            when length(w) > 4 and w like '%ies' then left(w, -3) || 'y'
            when length(w) > 3 and w like '%s' and w not like '%ss' and w not like '%us' then left(w, -1)
            else w
        end
    ),
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
ln(1 + ({{ n_docs }} - {{ df }} + 0.5) / ({{ df }} + 0.5))
    * ({{ tf }} * ({{ var('lexical_k1') }} + 1))
    / ({{ tf }} + {{ var('lexical_k1') }} * (1 - {{ var('lexical_b') }} + {{ var('lexical_b') }} * {{ doc_len }} / nullif({{ avg_doc_len }}, 0)))
{%- endmacro %}
