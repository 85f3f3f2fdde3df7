{#- Matching text against the rules' regular expressions (seeds/extraction_rules.csv,
    clause_rules.csv, time_expressions.csv) in the rule extraction (macros/extraction.sql).
    DuckDB compiles a pattern that is a column again for every row it is evaluated on, so a join
    of clauses with rules on a pattern column compiled one regex per (rule, clause) pair: ~90% of
    the extraction's time (docs/serving.md "Where the worker's time goes"). On DuckDB the macros
    below therefore render the rules' patterns as constants, read from the seed at compile time
    (a build recompiles after a seed edit; the hot tail's published statement is rendered by the
    same build as its copy of the seeds), so that each regex is compiled once per statement.
    Where the seed cannot be read at compile time (dbt parse, sqlfluff, a unit test whose seed
    rows are fixtures) and on PostgreSQL they render the pattern column, which means the same.
    A condition is a macro of the pattern's SQL expression (the column, or a string literal)
    that returns the SQL boolean. -#}

{#- The rows (tuples of columns) of relation seed, ordered by the columns, when it can be read
    now; else none (also in a unit test: its seed rows are fixtures, not the table). seed: a
    relation (a ref) or none; where: an optional SQL condition. -#}
{% macro compile_time_rows(seed, columns, where=none) -%}
{%- if seed is none or seed is string or not execute or model.resource_type == 'unit_test'
      or seed.schema is none or seed.identifier is none or load_relation(seed) is none -%}
    {{ return(none) }}
{%- endif -%}
{{ return(run_query('select ' ~ columns | join(', ') ~ ' from ' ~ seed
    ~ (' where ' ~ where if where else '') ~ ' order by ' ~ columns | join(', ')).rows) }}
{%- endmacro %}

{#- One pattern (a SQL string literal) that matches what any of the patterns matches: their
    alternation, each in its own group (a flag such as (?i) stays in its group). -#}
{% macro alternation_literal(patterns) -%}
{{ sql_literal('(?:' ~ patterns | join(')|(?:') ~ ')') }}
{%- endmacro %}

{#- FROM items pairing the rows of rows_rel (alias c) with the rules of rules_rel (alias r) whose
    pattern satisfies condition. seed: the relation rules_rel's rows come from (columns key and
    pattern), readable at compile time, else none; key: a column unique over the rules. -#}
{% macro pattern_rule_join(rules_rel, r, rows_rel, c, condition, seed=none, key=none) -%}
  {{ return(adapter.dispatch('pattern_rule_join')(rules_rel, r, rows_rel, c, condition, seed, key)) }}
{%- endmacro %}

{% macro default__pattern_rule_join(rules_rel, r, rows_rel, c, condition, seed, key) -%}
{{ rule_major_join(rules_rel, r, rows_rel, c, condition(r ~ '.pattern')) }}
{%- endmacro %}

{#- DuckDB: every row's list of the keys of the rules it matches (each rule's pattern a constant),
    unnested and joined back to the rules by key. -#}
{% macro duckdb__pattern_rule_join(rules_rel, r, rows_rel, c, condition, seed, key) -%}
{%- set rules = compile_time_rows(seed, [key, 'pattern'], 'pattern is not null') -%}
{%- if rules is none -%}
{{ default__pattern_rule_join(rules_rel, r, rows_rel, c, condition, seed, key) }}
{%- else -%}
{{ rows_rel }} as {{ c }}
cross join unnest([
    null::varchar
    {%- for rule_key, pattern in rules %},
    case when {{ condition(sql_literal(pattern)) }} then {{ sql_literal(rule_key) }} end
    {%- endfor %}
]) as {{ r }}_hits ({{ key }})
inner join {{ rules_rel }} as {{ r }} on {{ r }}.{{ key }} = {{ r }}_hits.{{ key }}
{%- endif -%}
{%- endmacro %}

{#- The rows of rows_rel (alias c) that some rule's pattern may satisfy condition for: on DuckDB
    a parenthesised subquery of those that satisfy it for the alternation of all the patterns of
    seed (condition must hold for an alternation exactly when it holds for one of its patterns),
    so that a pattern_rule_join on the pattern column runs on those rows only; else rows_rel. -#}
{% macro rows_any_pattern_may_match(rows_rel, c, condition, seed=none) -%}
  {{ return(adapter.dispatch('rows_any_pattern_may_match')(rows_rel, c, condition, seed)) }}
{%- endmacro %}

{% macro default__rows_any_pattern_may_match(rows_rel, c, condition, seed) -%}
{{ rows_rel }}
{%- endmacro %}

{% macro duckdb__rows_any_pattern_may_match(rows_rel, c, condition, seed) -%}
{%- set rules = compile_time_rows(seed, ['pattern'], 'pattern is not null') -%}
{%- if rules is none -%}
{{ default__rows_any_pattern_may_match(rows_rel, c, condition, seed) }}
{%- elif rules | length == 0 -%}
(select * from {{ rows_rel }} where false)
{%- else -%}
(select * from {{ rows_rel }} as {{ c }} where {{ condition(alternation_literal(rules | map(attribute=0) | list)) }})
{%- endif -%}
{%- endmacro %}

{#- SQL boolean: some rule of rules_rel (alias r, filtered by rules_where) satisfies condition.
    seed, seed_where: the relation and condition the same rules come from at compile time (else
    none). -#}
{% macro any_pattern_rule(rules_rel, r, rules_where, condition, seed=none, seed_where=none) -%}
  {{ return(adapter.dispatch('any_pattern_rule')(rules_rel, r, rules_where, condition, seed, seed_where)) }}
{%- endmacro %}

{% macro default__any_pattern_rule(rules_rel, r, rules_where, condition, seed, seed_where) -%}
exists (
    select 1 from {{ rules_rel }} as {{ r }}
    where {{ rules_where }} and {{ condition(r ~ '.pattern') }}
)
{%- endmacro %}

{#- DuckDB: the condition on the alternation of the rules' patterns, one constant. condition must
    hold for an alternation exactly when it holds for one of its patterns (a search or a full
    match). -#}
{% macro duckdb__any_pattern_rule(rules_rel, r, rules_where, condition, seed, seed_where) -%}
{%- set rules = compile_time_rows(seed, ['pattern'], '(' ~ seed_where ~ ') and pattern is not null') -%}
{%- if rules is none -%}
{{ default__any_pattern_rule(rules_rel, r, rules_where, condition, seed, seed_where) }}
{%- elif rules | length == 0 -%}
false
{%- else -%}
coalesce({{ condition(alternation_literal(rules | map(attribute=0) | list)) }}, false)
{%- endif -%}
{%- endmacro %}

{#- text_expr rewritten by the clause rule of text_rules' row r (columns clause_rule_id, pattern,
    replacement): every match of its pattern replaced. seed, purpose: the clause_rules relation
    and the purpose of the rules r can be, read at compile time when possible. -#}
{% macro clause_rule_rewrite(text_expr, r, seed, purpose) -%}
  {{ return(adapter.dispatch('clause_rule_rewrite')(text_expr, r, seed, purpose)) }}
{%- endmacro %}

{% macro default__clause_rule_rewrite(text_expr, r, seed, purpose) -%}
regexp_replace({{ text_expr }}, {{ pg_regex(r ~ '.pattern') }}, {{ r }}.replacement, 'g')
{%- endmacro %}

{#- DuckDB: a case over the rule's id with each rule's pattern and replacement as constants (the
    pattern column for a rule not known at compile time). -#}
{% macro duckdb__clause_rule_rewrite(text_expr, r, seed, purpose) -%}
{%- set rules = compile_time_rows(seed, ['clause_rule_id', 'pattern', "coalesce(replacement, '')"],
                                  "purpose = " ~ sql_literal(purpose) ~ " and pattern is not null") -%}
{%- if rules is none or rules | length == 0 -%}
{{ default__clause_rule_rewrite(text_expr, r, seed, purpose) }}
{%- else -%}
case {{ r }}.clause_rule_id
    {%- for rule_key, pattern, replacement in rules %}
    when {{ sql_literal(rule_key) }} then regexp_replace({{ text_expr }}, {{ sql_literal(pattern) }}, {{ sql_literal(replacement) }}, 'g')
    {%- endfor %}
    else {{ default__clause_rule_rewrite(text_expr, r, seed, purpose) }}
end
{%- endif -%}
{%- endmacro %}
