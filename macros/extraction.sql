{#- Accepted messages of the given roles with the time their landing row was loaded; in an
    incremental run only those loaded since the model's last run. Shared by the extraction
    models (rules and episodes) so that both see exactly the same new messages.
    messages: ref('int_messages_validated') (accepted rows: reject_reason is null), passed by the
    model; roles: list of role names (a var). Columns: message_id, user_id, content, message_at,
    loaded_at. -#}
{% macro new_messages_to_extract(messages, roles) -%}
    select
        m.message_id,
        m.user_id,
        m.content,
        m.message_at,
        m.loaded_at
    from {{ messages }} as m
    where m.reject_reason is null
        and m.role in ({{ sql_string_list(roles) }})
    {% if is_incremental() %}
        and m.loaded_at > (select coalesce(max(loaded_at), '-infinity'::timestamp) from {{ this }})
    {% endif %}
{%- endmacro %}

{#- The character that marks clause boundaries and separates a rule's statements, slots and
    entities (seeds/clause_rules.csv, seeds/extraction_rules.csv). Removed from message text
    before any rule runs, so user text can never contain it. -#}
{% macro clause_marker() -%}‖{%- endmacro %}

{#- True when the time expression pattern (seeds/time_expressions.csv, lower case, no \b: word
    edges are added here so the pattern reads the same on DuckDB and PostgreSQL) occurs in the
    text as whole words (opening: only at the start of the text). -#}
{% macro time_expression_match(text_expr, pattern_expr, opening=false) -%}
{{ regexp_full_match('lower(' ~ text_expr ~ ')', "'" ~ ("" if opening else "(?:^|.*[^a-z])") ~ "(?:' || " ~ pattern_expr ~ " || ')(?:[^a-z].*)?'") }}
{%- endmacro %}

{#- The day a time expression resolves to against the message time: grain day (message day +
    shift days), week (Monday of the message week + shift weeks, + weekday - 1 days when a
    weekday 1-7 is given), month / year (first day, + shift), weekday (the next (shift > 0) or
    previous (shift < 0) such weekday, never the message day itself). NULL when grain is NULL. -#}
{% macro resolve_happened_on(at_expr, grain_expr, shift_expr, weekday_expr) -%}
{%- set day = 'cast(' ~ at_expr ~ ' as date)' -%}
{%- set dow = 'cast(extract(isodow from ' ~ at_expr ~ ') as integer)' -%}
case {{ grain_expr }}
    when 'day' then {{ day }} + {{ shift_expr }}
    when 'week' then cast(date_trunc('week', {{ at_expr }}) as date) + 7 * {{ shift_expr }} + coalesce({{ weekday_expr }} - 1, 0)
    when 'month' then cast(date_trunc('month', {{ at_expr }}) + {{ shift_expr }} * interval '1 month' as date)
    when 'year' then cast(date_trunc('year', {{ at_expr }}) + {{ shift_expr }} * interval '1 year' as date)
    when 'weekday' then {{ day }} + case
        when {{ shift_expr }} > 0 then (({{ weekday_expr }} - {{ dow }} + 6) % 7) + 1
        else -((({{ dow }} - {{ weekday_expr }} + 6) % 7) + 1)
    end
end
{%- endmacro %}

{#- Two candidates (table aliases a, b) may be one memory only when neither states the value of
    a slot: slot values are never folded together by similarity (Porto and Lisbon, or a second
    cat, read alike to the embedding), a newer one supersedes the older by slot and entity. -#}
{% macro same_thing(a, b) -%}
({{ a }}.slot is null and {{ b }}.slot is null)
{%- endmacro %}
