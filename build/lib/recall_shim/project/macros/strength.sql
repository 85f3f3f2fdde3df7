{#- Decay and reinforcement, the reference design's rules as pure expressions.
    Days are fractional: strength is a function of elapsed time, so it never decays twice.
    rate, floor, step default to vars decay_rate_per_day, strength_floor, reinforce_step. -#}

{% macro decay_strength(strength_expr, days_expr, rate=none, floor=none) -%}
greatest(
    {{ floor if floor is not none else number_var('strength_floor') }},
    ({{ strength_expr }}) * pow({{ rate if rate is not none else number_var('decay_rate_per_day') }}, greatest(({{ days_expr }})::{{ double_type() }}, 0))
)
{%- endmacro %}

{% macro reinforce_strength(strength_expr, step=none, floor=none) -%}
{%- set step = step if step is not none else number_var('reinforce_step') -%}
greatest(
    {{ floor if floor is not none else number_var('strength_floor') }},
    ({{ strength_expr }}) * (1 - {{ step }}) + {{ step }}
)
{%- endmacro %}

{% macro days_between(from_ts, to_ts) -%}
({{ epoch_seconds(to_ts) }} - {{ epoch_seconds(from_ts) }}) / 86400.0
{%- endmacro %}

{#- Fold a list of gaps (days between consecutive reinforcing events, starting from creation)
    into a strength: decay over each gap, then reinforce. Start at 1.0. -#}
{% macro fold_strength(gaps_list_expr, rate=none, floor=none, step=none) -%}
  {{ return(adapter.dispatch('fold_strength')(gaps_list_expr, rate, floor, step)) }}
{%- endmacro %}

{#- PostgreSQL: the same fold as a plpgsql loop (created by prepare_target, macros/dialect.sql). -#}
{% macro postgres__fold_strength(gaps_list_expr, rate=none, floor=none, step=none) -%}
{{ target.schema }}.fold_strength_gaps(
    {{ gaps_list_expr }},
    {{ rate if rate is not none else number_var('decay_rate_per_day') }},
    {{ floor if floor is not none else number_var('strength_floor') }},
    {{ step if step is not none else number_var('reinforce_step') }}
)
{%- endmacro %}

{% macro duckdb__fold_strength(gaps_list_expr, rate=none, floor=none, step=none) -%}
list_reduce(
    {{ gaps_list_expr }},
    lambda s, gap: {{ reinforce_strength(decay_strength('s', 'gap', rate, floor), step, floor) }},
    1.0::double
)
{%- endmacro %}

{#- The build's as-of time: var as_of (checked by timestamp_var, macros/vars.sql) or the time the
    run started, as a quoted timestamp literal. -#}
{% macro as_of_timestamp() -%}
  {%- set as_of = timestamp_var('as_of') -%}
  {%- if as_of is none -%}
    {{ sql_literal(run_started_at.strftime("%Y-%m-%d %H:%M:%S.%f")) }}::timestamp
  {%- else -%}
    {{ sql_literal(as_of) }}::timestamp
  {%- endif -%}
{%- endmacro %}
