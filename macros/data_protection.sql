{#- Data protection: forget tombstones, per-user analyst macros (docs/data_protection.md). -#}

{#- The forget tombstones these conditions read (argument `tombstones`): a relation or CTE with
    columns scope, user_id, memory_id, message_id and forgotten_at (a timestamp), e.g.
    ref('stg_forget_requests'), or landed_tombstones(source('landing', 'forget')) in staging (a
    staging model does not read another staging model). The caller passes it, so that the model's
    file shows what it reads. -#}

{#- The tombstones as landed, typed like stg_forget_requests (its landing schema:
    forget_landing_columns), for the staging models that drop forgotten rows as they load. -#}
{% macro landed_tombstones(landing) -%}
    select
        scope,
        user_id,
        memory_id,
        message_id,
        {{ try_cast_text('forgotten_at', 'timestamp') }} as forgotten_at
    from {{ landing_rows(landing, forget_landing_columns()) }} as landed
    where tombstone_id is not null
{%- endmacro %}

{#- The landing schema of forget tombstones (recall_shim/forget/tombstones.py writes them). -#}
{% macro forget_landing_columns() -%}
{{ return({
    'tombstone_id': 'VARCHAR',
    'scope': 'VARCHAR',
    'user_id': 'VARCHAR',
    'memory_id': 'VARCHAR',
    'message_id': 'VARCHAR',
    'forgotten_at': 'VARCHAR',
}) }}
{%- endmacro %}

{#- SQL condition: the row of user `user_expr` that landed at `landed_expr` was forgotten (a user
    tombstone whose forgotten_at is at or after the time the row landed). Ids are compared as
    landed and trimmed, like forget's physical purge. -#}
{% macro is_forgotten_user_row(tombstones, user_expr, landed_expr) -%}
exists (
    select 1
    from {{ tombstones }} as forgotten
    where forgotten.scope = 'user'
      and (forgotten.user_id = {{ user_expr }} or forgotten.user_id = trim({{ user_expr }}))
      and {{ try_cast_text(landed_expr, 'timestamp') }} <= forgotten.forgotten_at
)
{%- endmacro %}

{#- SQL condition: memory `memory_id_expr` was forgotten by id (forever). With `user_expr`,
    `kind_expr` and `content_expr` (a memory row) a memory of the current id scheme is also
    forgotten when its owner has a tombstone for the id the same memory had in the legacy scheme
    (a store migrated by --full-refresh keeps its tombstones; macros/identity.sql). -#}
{% macro is_forgotten_memory(tombstones, memory_id_expr, user_expr=none, kind_expr=none, content_expr=none) -%}
({{ memory_id_expr }} in (
    select forgotten.memory_id
    from {{ tombstones }} as forgotten
    where forgotten.scope = 'memory'
)
{%- if user_expr is not none %}
or (not {{ is_legacy_memory_id(memory_id_expr) }} and exists (
    select 1
    from {{ tombstones }} as forgotten
    where forgotten.scope = 'memory'
      and forgotten.user_id = {{ user_expr }}
      and forgotten.memory_id = {{ legacy_memory_id_key(user_expr, kind_expr, normalised_content(content_expr)) }}
))
{%- endif %})
{%- endmacro %}

{#- SQL condition: the message of user `user_expr` whose message_id is one of `id_exprs` (a list
    of SQL expressions: the forms its id can take) was forgotten: a 'message' tombstone, written
    by forget for every message it removed, so that a replayed row (same user and message_id,
    landed after the forget) is dropped at the build, not loaded and not kept as a reject. User
    ids are compared as in is_forgotten_user_row. -#}
{% macro is_forgotten_message(tombstones, user_expr, id_exprs) -%}
{%- set key -%}
    (select {{ message_key('forgotten.user_id', 'forgotten.message_id') }}
     from {{ tombstones }} as forgotten where forgotten.scope = 'message')
{%- endset -%}
{#- one composite key per form, so that each test is a hash semi-join (a store may hold many
    message tombstones); coalesce: a row without user id is never forgotten by id -#}
coalesce(
{%- for u in [user_expr, 'trim(' ~ user_expr ~ ')'] -%}
{%- for i in id_exprs %}
    {{ message_key(u, i) }} in {{ key }}{{ " or" if not loop.last }}
{%- endfor %}{{ " or" if not loop.last }}
{%- endfor %},
    false
)
{%- endmacro %}

{#- An unambiguous text key of (user, message id) (length-prefixed user). -#}
{% macro message_key(user_expr, message_id_expr) -%}
(length({{ user_expr }})::varchar || ':' || {{ user_expr }} || '|' || {{ message_id_expr }})
{%- endmacro %}

{#- on-run-end: per-user table macros for analysts, so that the everyday query is scoped to one
    user (`select * from user_memories('alice')`), and a comment on every relation saying whether
    it holds all users' rows (meta user_scope). -#}
{% macro create_user_scoped_macros() %}
  {{ return(adapter.dispatch('create_user_scoped_macros')()) }}
{% endmacro %}

{#- One user-scoped table function: DuckDB table macro, PostgreSQL set-returning SQL function. -#}
{% macro user_scoped_function(s, name, table) %}
  {{ return(adapter.dispatch('user_scoped_function')(s, name, table)) }}
{% endmacro %}

{% macro duckdb__user_scoped_function(s, name, table) %}
    create or replace macro {{ s }}.{{ name }}(uid) as table
        select * from {{ s }}.{{ table }} where user_id = uid;
{% endmacro %}

{% macro postgres__user_scoped_function(s, name, table) %}
    create or replace function {{ s }}.{{ name }}(uid text) returns setof {{ s }}.{{ table }}
        language sql stable as $$ select * from {{ s }}.{{ table }} where user_id = uid $$;
{% endmacro %}

{% macro default__create_user_scoped_macros() %}
  {%- if execute and flags.WHICH in ('build', 'run') -%}
    {%- set s = target.schema -%}
    {%- set scoped = {
        'user_memories': 'long_term_memory',
        'user_messages': 'session_messages',
        'user_rejects': 'session_log_rejects',
        'user_archived_memories': 'memory_archive',
    } -%}
    {%- for name, table in scoped.items() -%}
      {%- if adapter.get_relation(database=target.database, schema=s, identifier=table) is not none %}
    {{ user_scoped_function(s, name, table) }}
      {%- endif -%}
    {%- endfor %}
    {%- for node in graph.nodes.values() if node.resource_type in ('model', 'seed', 'snapshot') -%}
      {%- set scope = node.config.meta.get('user_scope') -%}
      {%- set rel = adapter.get_relation(database=target.database, schema=node.schema, identifier=node.alias) -%}
      {%- if scope and rel is not none and rel.type == 'table' %}
    comment on table {{ rel }} is '{{ "ALL USERS: every user''s rows; filter by user_id or use the user_* table macros" if scope == "all_users" else "no per-user data" }}';
      {%- endif -%}
    {%- endfor %}
    select 1;
  {%- else -%}
    select 1;
  {%- endif -%}
{% endmacro %}
