{#- The one way a setting (a dbt var) or an outside string reaches SQL text
    (docs/data_protection.md "Settings and paths in SQL").

    Every var is read through one of the typed macros below, never with a bare var(): each checks
    the value against its rule in var_rules() (check_var: type, range, allow-list or pattern) and
    raises a compiler error naming the var and what it expected. Models render while dbt parses
    the project, and check_vars (on-run-start) checks every var once more, so a bad value stops
    `dbt parse` / `dbt build` before any SQL runs.

      number_var(name)      an int or float (or a string spelling one) within [min, max];
                            '1; drop table', NaN and infinity are refused; renders as a number
      bool_var(name)        true / false
      choice_var(name)      one of an allow-list (fusion_method, retention_action, the forms)
      string_var(name)      a string matching the rule's pattern; emit it with sql_literal()
      string_list_var(name) a list of such strings; emit it with sql_string_list()
      timestamp_var(name)   none, or 'YYYY-MM-DD[( |T)HH:MM[:SS[.ffffff]]]' that is a real date,
                            as 'YYYY-MM-DD HH:MM:SS[.ffffff]'; as_of_timestamp() quotes it
      name_map_var(name)    a mapping with exactly the rule's keys, each value a string matching
                            its pattern (names: store_layout, serving_tables)
      sql_literal(value)    any string as a quoted SQL literal (quotes doubled, NUL refused)
      sql_string_list(vals) a list of strings, each through sql_literal
      glob_escape(path)     a path as a DuckDB glob that matches only itself (* ? [ escaped)
    The Python twin is recall_shim/common/sql.py. -#}

{#- The rule of every var in dbt_project.yml, in one place. kind: number (min, max, integer,
    nullable), bool, choice (allowed), string (pattern, full match), string_list (pattern,
    min_items), timestamp (nullable), name_map (keys, pattern). tests_py/test_security_sql_vars.py checks that every var
    of dbt_project.yml has a rule here and that no model, macro, snapshot or test calls var()
    outside this file. -#}
{% macro var_rules() -%}
  {%- set name_pattern = '[A-Za-z0-9_.:-]{1,64}' -%}
  {%- set role = {'kind': 'string_list', 'pattern': '[A-Za-z0-9_-]{1,64}', 'min_items': 1} -%}
  {%- set share = {'kind': 'number', 'min': 0, 'max': 1} -%}
  {%- set big = 1000000000 -%}
  {{- return({
      'store_path': {'kind': 'string', 'pattern': '[^\\\\?\\x00]{1,4096}',
                     'expected': 'a path without a backslash or ? (DuckDB reads \\ as a separator and ? as an option)'},
      'embedding_model': {'kind': 'string', 'pattern': name_pattern},
      'embedding_dim': {'kind': 'number', 'integer': true, 'min': 1, 'max': 16000},
      'embedding_memory_form': {'kind': 'choice', 'allowed': ['query', 'passage']},
      'embedding_query_form': {'kind': 'choice', 'allowed': ['query', 'passage']},
      'embedding_episode_form': {'kind': 'choice', 'allowed': ['query', 'passage']},
      'accepted_roles': role,
      'max_future_skew_minutes': {'kind': 'number', 'integer': true, 'min': 0, 'max': 100000000},
      'max_content_chars': {'kind': 'number', 'integer': true, 'min': 1, 'max': big},
      'max_user_id_chars': {'kind': 'number', 'integer': true, 'min': 1, 'max': big},
      'extract_roles': role,
      'max_memory_chars': {'kind': 'number', 'integer': true, 'min': 1, 'max': big},
      'episode_roles': role,
      'max_episode_chars': {'kind': 'number', 'integer': true, 'min': 1, 'max': big},
      'episode_min_terms': {'kind': 'number', 'integer': true, 'min': 0, 'max': big},
      'assistant_memory_roles': {'kind': 'string_list', 'pattern': '[A-Za-z0-9_-]{1,64}', 'min_items': 0},
      'assistant_memory_weight': {'kind': 'number', 'min': 0, 'max': 1000},
      'assistant_question_pattern': {'kind': 'string', 'pattern': '[^\\x00]{0,2000}'},
      'change_topic_max_df': {'kind': 'number', 'integer': true, 'min': 0, 'max': big},
      'consolidation_min_sim': {'kind': 'number', 'min': -1, 'max': 2},
      'lexical_k1': {'kind': 'number', 'min': 0, 'max': 1000},
      'lexical_b': share,
      'lexical_stopwords': {'kind': 'string_list', 'pattern': '[^\\x00]{1,64}', 'min_items': 0},
      'fusion_method': {'kind': 'choice', 'allowed': ['weighted', 'rrf', 'vector', 'lexical']},
      'fusion_rrf_k': {'kind': 'number', 'min': 0, 'max': big},
      'fusion_vector_weight': share,
      'lexical_saturation': {'kind': 'number', 'min': 0, 'max': big},
      'lexical_context_prev_weight': {'kind': 'number', 'min': 0, 'max': 1000},
      'lexical_context_next_weight': {'kind': 'number', 'min': 0, 'max': 1000},
      'question_episode_weight': {'kind': 'number', 'min': 0, 'max': 1000},
      'time_scope_weight': {'kind': 'number', 'min': 0, 'max': 1000},
      'slot_question_weight': {'kind': 'number', 'min': 0, 'max': 1000},
      'current_question_weight': {'kind': 'number', 'min': 0, 'max': 1000},
      'current_question_pattern': {'kind': 'string', 'pattern': '[^\\x00]{0,2000}'},
      'conversation_lift_weight': {'kind': 'number', 'min': 0, 'max': 1000},
      'conversation_lift_turns': {'kind': 'number', 'integer': true, 'min': 0, 'max': 1000000},
      'strength_weight': share,
      'llm_url': {'kind': 'string', 'pattern': '[^\\x00-\\x20\\x7f]{0,2048}'},
      'llm_model': {'kind': 'string', 'pattern': '[A-Za-z0-9_.:/@+-]{0,256}'},
      'llm_batch_size': {'kind': 'number', 'integer': true, 'min': 1, 'max': 10000},
      'llm_timeout_seconds': {'kind': 'number', 'min': 0, 'max': 86400},
      'llm_max_retries': {'kind': 'number', 'integer': true, 'min': 0, 'max': 100},
      'llm_retry_backoff_seconds': {'kind': 'number', 'min': 0, 'max': 3600},
      'llm_max_batches_per_build': {'kind': 'number', 'integer': true, 'min': 0, 'max': big},
      'llm_max_message_chars': {'kind': 'number', 'integer': true, 'min': 1, 'max': big},
      'llm_kinds': {'kind': 'string_list', 'pattern': '[A-Za-z0-9_-]{1,64}', 'min_items': 1},
      'decay_rate_per_day': share,
      'strength_floor': share,
      'reinforce_step': share,
      'as_of': {'kind': 'timestamp', 'nullable': true},
      'unchanged_build_max_age_hours': {'kind': 'number', 'min': 0, 'max': 1000000},
      'recall_top_k': {'kind': 'number', 'integer': true, 'min': 1, 'max': 100000},
      'recall_min_sim': {'kind': 'number', 'min': -1, 'max': 1},
      'recall_max_top_k': {'kind': 'number', 'integer': true, 'min': 1, 'max': 100000},
      'recall_episodes_by_default': {'kind': 'bool'},
      'hot_tail': {'kind': 'bool'},
      'recall_max_query_chars': {'kind': 'number', 'integer': true, 'min': 1, 'max': big},
      'retention_days': {'kind': 'number', 'integer': true, 'min': 0, 'max': 1000000, 'nullable': true},
      'retention_action': {'kind': 'choice', 'allowed': ['archive', 'drop']},
      'retention_kinds': {'kind': 'string_list', 'pattern': '[A-Za-z0-9_-]{1,64}', 'min_items': 1},
      'recall_index_min_rows': {'kind': 'number', 'integer': true, 'min': 0, 'max': 1000000000000},
      'recall_index_nprobe': {'kind': 'number', 'integer': true, 'min': 1, 'max': big},
      'recall_index_candidates': {'kind': 'number', 'integer': true, 'min': 1, 'max': big},
      'recall_index_ef_search': {'kind': 'number', 'integer': true, 'min': 0, 'max': 1000},
      'recall_index_hnsw_m': {'kind': 'number', 'integer': true, 'min': 2, 'max': 100},
      'recall_index_hnsw_ef_construction': {'kind': 'number', 'integer': true, 'min': 4, 'max': 1000},
      'recall_index_max_share': share,
      'recall_index_lists_per_sqrt': {'kind': 'number', 'min': 0, 'max': 1000000},
      'recall_index_retrain_growth': {'kind': 'number', 'min': 1, 'max': 1000000},
      'recall_index_compact_share': share,
      'recall_index_tail_share': share,
      'serving_compact_share': {'kind': 'number', 'min': 0, 'max': 1000000},
      'serving_max_layers': {'kind': 'number', 'integer': true, 'min': 1, 'max': 10000},
      'store_layout': {'kind': 'name_map', 'pattern': '(?![.]{1,2}$)[A-Za-z0-9_.-]{1,64}',
                       'keys': ['inbox', 'serving', 'build_lock', 'dbt', 'audit', 'forget_journal', 'write_lock',
                                'empty_marker', 'messages', 'access', 'forget', 'snapshot_prefix', 'ready', 'manifest']},
      'serving_tables': {'kind': 'name_map', 'pattern': '([a-z_]+(, [a-z_]+)*)?',
                         'keys': ['long_term_memory', 'memory_term_index', 'memory_term_stats', 'recall_queries',
                                  'recall_index_settings']},
  }) -}}
{%- endmacro %}

{#- Check `value` against the rule of var `name`. Returns {'value': the value to use (numbers as
    int/float, a timestamp as 'YYYY-MM-DD HH:MM:SS[.ffffff]'), 'error': none} or {'value': none,
    'error': "var <name> must be <what it expects>, got <a short view of the value>"}. Raises
    nothing: the *_var macros raise, var_check_report reports. -#}
{% macro check_var(name, value) -%}
  {%- set rule = var_rules().get(name) -%}
  {%- if rule is none -%}
    {{ return({'value': none, 'error': 'var ' ~ name ~ ' has no rule in macros/vars.sql var_rules()'}) }}
  {%- endif -%}
  {%- set kind = rule.kind -%}
  {%- set nullable = rule.get('nullable', false) -%}
  {%- if kind == 'number' -%}
    {%- set expected = ('an integer' if rule.get('integer') else 'a number') ~ ' from ' ~ rule.min ~ ' to ' ~ rule.max -%}
  {%- elif kind == 'bool' -%}
    {%- set expected = 'true or false' -%}
  {%- elif kind == 'choice' -%}
    {%- set expected = (rule.allowed[:-1] | join(', ')) ~ ' or ' ~ rule.allowed[-1] -%}
  {%- elif kind == 'string' -%}
    {%- set expected = rule.get('expected', 'a string matching ' ~ rule.pattern) -%}
  {%- elif kind == 'string_list' -%}
    {%- set expected = 'a list of at least ' ~ rule.min_items ~ ' string(s), each matching ' ~ rule.pattern -%}
  {%- elif kind == 'name_map' -%}
    {%- set expected = 'a mapping of exactly ' ~ (rule['keys'] | join(', ')) ~ ' to strings matching ' ~ rule.pattern -%}
  {%- else -%}
    {%- set expected = "a timestamp 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM[:SS[.ffffff]]' (space or T between)" -%}
  {%- endif -%}
  {%- set shown = value | string -%}
  {%- set refused = {'value': none, 'error': 'var ' ~ name ~ ' must be ' ~ expected ~ (' or null' if nullable else '')
      ~ ', got ' ~ (shown[:60] ~ '...' if shown | length > 60 else shown)} -%}
  {%- if value is none -%}
    {{ return({'value': none, 'error': none} if nullable else refused) }}
  {%- endif -%}

  {%- if kind == 'number' -%}
    {%- if value is boolean -%}{{ return(refused) }}{%- endif -%}
    {%- if value is number -%}
      {%- set n = value -%}
    {%- elif value is string and modules.re.fullmatch('[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]{1,3})?', value) -%}
      {%- set n = value | float -%}
    {%- else -%}
      {{ return(refused) }}
    {%- endif -%}
    {#- NaN fails every comparison, infinity the range -#}
    {%- if not (n >= rule.min and n <= rule.max) -%}{{ return(refused) }}{%- endif -%}
    {%- if rule.get('integer') -%}
      {{ return({'value': n | int, 'error': none} if n == (n | int) else refused) }}
    {%- endif -%}
    {{ return({'value': n if n is integer else n | float, 'error': none}) }}

  {%- elif kind == 'bool' -%}
    {%- if value is boolean -%}{{ return({'value': value, 'error': none}) }}{%- endif -%}
    {%- if value is string and value | lower in ('true', 'false') -%}
      {{ return({'value': value | lower == 'true', 'error': none}) }}
    {%- endif -%}
    {{ return(refused) }}

  {%- elif kind == 'choice' -%}
    {{ return({'value': value, 'error': none} if value is string and value in rule.allowed else refused) }}

  {%- elif kind == 'string' -%}
    {{ return({'value': value, 'error': none} if value is string and modules.re.fullmatch(rule.pattern, value) else refused) }}

  {%- elif kind == 'string_list' -%}
    {%- if value is string or value is mapping or value is not iterable or value | length < rule.min_items -%}
      {{ return(refused) }}
    {%- endif -%}
    {%- for v in value -%}
      {%- if v is not string or not modules.re.fullmatch(rule.pattern, v) -%}{{ return(refused) }}{%- endif -%}
    {%- endfor -%}
    {{ return({'value': value | list, 'error': none}) }}

  {%- elif kind == 'name_map' -%}
    {%- if value is not mapping or (value.keys() | list | sort) != (rule['keys'] | sort) -%}{{ return(refused) }}{%- endif -%}
    {%- for k in rule['keys'] -%}
      {%- if value[k] is not string or not modules.re.fullmatch(rule.pattern, value[k]) -%}{{ return(refused) }}{%- endif -%}
    {%- endfor -%}
    {{ return({'value': value, 'error': none}) }}

  {%- else -%}
    {#- a timestamp; YAML reads an unquoted 2026-12-01 as a date: its text is checked -#}
    {%- set text = value if value is string else (shown if value.isoformat is defined else '') -%}
    {%- set m = modules.re.fullmatch('([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[ T]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.]([0-9]{1,6}))?)?)?', text) -%}
    {%- if not m -%}{{ return(refused) }}{%- endif -%}
    {%- set y, mo, d = m.group(1) | int, m.group(2) | int, m.group(3) | int -%}
    {%- set hh, mi, ss = (m.group(4) or '0') | int, (m.group(5) or '0') | int, (m.group(6) or '0') | int -%}
    {%- if y < 1 or mo < 1 or mo > 12 or d < 1 or hh > 23 or mi > 59 or ss > 59 -%}{{ return(refused) }}{%- endif -%}
    {%- set first = modules.datetime.date(y, mo, 1) -%}
    {%- set next_first = modules.datetime.date(y + 1, 1, 1) if mo == 12 else modules.datetime.date(y, mo + 1, 1) -%}
    {%- if d > (next_first - first).days -%}{{ return(refused) }}{%- endif -%}
    {{ return({'value': m.group(1) ~ '-' ~ m.group(2) ~ '-' ~ m.group(3) ~ ' ' ~ (m.group(4) or '00') ~ ':'
        ~ (m.group(5) or '00') ~ ':' ~ (m.group(6) or '00') ~ ('.' ~ m.group(7) if m.group(7) else ''), 'error': none}) }}
  {%- endif -%}
{%- endmacro %}

{#- The checked value of var `name`, whose rule must be of `kind`; a compiler error otherwise. -#}
{% macro read_var(name, kind) -%}
  {%- set rule = var_rules().get(name) -%}
  {%- if rule is not none and rule.kind != kind -%}
    {{ exceptions.raise_compiler_error("var " ~ name ~ " is a " ~ rule.kind ~ " setting, read as " ~ kind) }}
  {%- endif -%}
  {%- set checked = check_var(name, var(name)) -%}
  {%- if checked.error is not none -%}{{ exceptions.raise_compiler_error(checked.error) }}{%- endif -%}
  {{ return(checked.value) }}
{%- endmacro %}

{% macro number_var(name) -%}{{ return(read_var(name, 'number')) }}{%- endmacro %}

{% macro bool_var(name) -%}{{ return(read_var(name, 'bool')) }}{%- endmacro %}

{% macro choice_var(name) -%}{{ return(read_var(name, 'choice')) }}{%- endmacro %}

{% macro string_var(name) -%}{{ return(read_var(name, 'string')) }}{%- endmacro %}

{% macro string_list_var(name) -%}{{ return(read_var(name, 'string_list')) }}{%- endmacro %}

{% macro timestamp_var(name) -%}{{ return(read_var(name, 'timestamp')) }}{%- endmacro %}

{% macro name_map_var(name) -%}{{ return(read_var(name, 'name_map')) }}{%- endmacro %}

{#- A string as a quoted SQL literal: quotes doubled; none -> null. Backslashes are literal in
    both targets (DuckDB; PostgreSQL with standard_conforming_strings, its default). -#}
{% macro sql_literal(value) -%}
  {%- if value is none -%}{{ return('null') }}{%- endif -%}
  {%- if value is not string -%}
    {{ exceptions.raise_compiler_error("sql_literal takes a string, got " ~ (value | string)[:60]) }}
  {%- endif -%}
  {%- if modules.re.search('\\x00', value) -%}
    {{ exceptions.raise_compiler_error("sql_literal: the string holds a NUL character") }}
  {%- endif -%}
  {{ return("'" ~ (value | replace("'", "''")) ~ "'") }}
{%- endmacro %}

{#- A Jinja list of strings as a SQL list of quoted literals: ['a', "b'c"] -> 'a', 'b''c'. -#}
{% macro sql_string_list(values) -%}
  {%- if values is string or values is mapping or values is not iterable -%}
    {{ exceptions.raise_compiler_error("sql_string_list takes a list of strings, got " ~ (values | string)[:60]) }}
  {%- endif -%}
  {%- for v in values -%}{{ sql_literal(v) }}{{ ", " if not loop.last }}{%- endfor -%}
{%- endmacro %}

{#- A path as a DuckDB glob pattern that matches only that path: each of * ? [ becomes a one-
    character class ([*] [?] [[]), so a folder named 'a*' never reads the files of 'ab'. The
    result is text for sql_literal (or for a pattern built on it, e.g. ~ '/*.jsonl'). -#}
{% macro glob_escape(path) -%}
  {{ return(path | replace('[', '[[]') | replace('*', '[*]') | replace('?', '[?]')) }}
{%- endmacro %}

{#- on-run-start: check every var against its rule, so that a bad value also stops a run when
    only a Python model or a test reads it (their config is not SQL, but it must be right). -#}
{% macro check_vars() -%}
  {%- for name in var_rules() -%}
    {%- set checked = check_var(name, var(name)) -%}
    {%- if checked.error is not none -%}{{ exceptions.raise_compiler_error(checked.error) }}{%- endif -%}
  {%- endfor -%}
  select 1
{%- endmacro %}

{#- run-operation: check many candidate values without a build, e.g.
    dbt run-operation var_check_report --args '{cases: [[as_of, "2026-12-01"], [recall_top_k, "5; --"]]}'
    logs one JSON line per case: {"name", "value" (as checked, or null), "error" (or null)}. -#}
{% macro var_check_report(cases) -%}
  {%- for case in cases -%}
    {%- set checked = check_var(case[0], case[1]) -%}
    {%- do log('var_check ' ~ tojson({'name': case[0], 'value': checked.value, 'error': checked.error}), info=true) -%}
  {%- endfor -%}
{%- endmacro %}
