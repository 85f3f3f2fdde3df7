{#- Small SQL pieces that differ between the targets (docs/scaling_out.md). Each dispatches to
    duckdb__<name> (today's DuckDB SQL) or postgres__<name> (PostgreSQL 16 + pgvector). -#}

{#- The raw rows writers landed in one landing channel, with a _landing_file column.
    channel: 'messages' | 'access'; columns: {name: DuckDB type} of the landing schema;
    relation: the incremental model itself (only files it has not loaded are read) or none.
    DuckDB: the channel's immutable JSONL files; PostgreSQL: the table <channel>_landing in the
    target schema that writers INSERT into through ordinary transactions (recall_shim/_pg.py);
    the model's own anti-join skips rows it already loaded. -#}
{% macro landing_rows(channel, columns, relation=none) -%}
  {{ return(adapter.dispatch('landing_rows')(channel, columns, relation)) }}
{%- endmacro %}

{% macro duckdb__landing_rows(channel, columns, relation=none) -%}
{{ read_landing(channel, columns, new_landing_files(channel, relation) if relation is not none else none) }}
{%- endmacro %}

{% macro postgres__landing_rows(channel, columns, relation=none) -%}
{{ target.schema }}.{{ landing_table(channel) }}
{%- endmacro %}

{#- Name of the PostgreSQL landing table of a channel (twin of recall_shim/_pg.py LANDING_TABLES). -#}
{% macro landing_table(channel) -%}
{{ 'session_log_landing' if channel == 'messages' else 'recall_access_landing' }}
{%- endmacro %}

{#- expr cast to type, or NULL when the text is not a valid value of type. -#}
{% macro safe_cast(expr, type) -%}
  {{ return(adapter.dispatch('safe_cast')(expr, type)) }}
{%- endmacro %}

{% macro duckdb__safe_cast(expr, type) -%}
try_cast({{ expr }} as {{ type }})
{%- endmacro %}

{% macro postgres__safe_cast(expr, type) -%}
case when pg_input_is_valid({{ expr }}, '{{ type }}') then ({{ expr }})::{{ type }} end
{%- endmacro %}

{#- Whether the whole of text_expr matches the regular expression pattern_expr. -#}
{% macro regexp_full_match(text_expr, pattern_expr) -%}
  {{ return(adapter.dispatch('regexp_full_match')(text_expr, pattern_expr)) }}
{%- endmacro %}

{% macro duckdb__regexp_full_match(text_expr, pattern_expr) -%}
regexp_full_match({{ text_expr }}, {{ pattern_expr }})
{%- endmacro %}

{% macro postgres__regexp_full_match(text_expr, pattern_expr) -%}
({{ text_expr }} ~ ('^(?:' || {{ pg_regex(pattern_expr) }} || ')$'))
{%- endmacro %}

{#- Whether some part of text_expr matches the regular expression pattern_expr. -#}
{% macro regexp_contains(text_expr, pattern_expr) -%}
  {{ return(adapter.dispatch('regexp_contains')(text_expr, pattern_expr)) }}
{%- endmacro %}

{% macro duckdb__regexp_contains(text_expr, pattern_expr) -%}
regexp_matches({{ text_expr }}, {{ pattern_expr }})
{%- endmacro %}

{% macro postgres__regexp_contains(text_expr, pattern_expr) -%}
({{ text_expr }} ~ {{ pg_regex(pattern_expr) }})
{%- endmacro %}

{#- A DuckDB (RE2) pattern literal rewritten for PostgreSQL's regex engine, which has no Unicode
    classes: \pZ (Unicode separators) becomes the list of those code points, and \x00 becomes
    \x01 (PostgreSQL text cannot hold NUL, so nothing is lost). -#}
{% macro pg_regex(pattern_expr) -%}
{{ pattern_expr
   | replace('\\pZ', '\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000')
   | replace('\\x00', '\\x01') }}
{%- endmacro %}

{#- An interval of n_expr minutes. -#}
{% macro minutes_interval(n_expr) -%}
  {{ return(adapter.dispatch('minutes_interval')(n_expr)) }}
{%- endmacro %}

{% macro duckdb__minutes_interval(n_expr) -%}
to_minutes({{ n_expr }}::bigint)
{%- endmacro %}

{% macro postgres__minutes_interval(n_expr) -%}
make_interval(mins => {{ n_expr }})
{%- endmacro %}

{#- Cosine similarity of two embeddings (NULL when either is NULL). -#}
{% macro cosine_similarity(a, b, dim=none) -%}
  {{ return(adapter.dispatch('cosine_similarity')(a, b, dim)) }}
{%- endmacro %}

{% macro duckdb__cosine_similarity(a, b, dim=none) -%}
array_cosine_similarity({{ a }}::{{ embedding_type(dim) }}, {{ b }}::{{ embedding_type(dim) }})
{%- endmacro %}

{#- pgvector's <=> is cosine distance; 1 - distance is the similarity. -#}
{% macro postgres__cosine_similarity(a, b, dim=none) -%}
(1 - ({{ a }}::{{ embedding_type(dim) }} <=> {{ b }}::{{ embedding_type(dim) }}))
{%- endmacro %}
