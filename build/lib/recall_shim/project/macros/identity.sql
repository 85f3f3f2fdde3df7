{#- Identity keys of messages, extractions and memories (docs/data_protection.md, "Identity:
    per-user message ids, collision-free memory ids").

    A key is md5 of its parts, each written as <length>:<text> (length in characters) and NULL
    as '~' (a length never starts with '~'), so two different tuples of parts can never give the
    same text to hash: 'ev|episode' + 'fact' and 'ev' + 'episode|fact' are different keys. The
    earlier keys, md5(concat_ws('|', ...)), were ambiguous (and concat_ws skips NULLs). -#}
{% macro id_hash(parts) -%}
md5({% for p in parts %}coalesce(length({{ p }})::varchar || ':' || {{ p }}, '~'){{ " || '|' || " if not loop.last }}{% endfor %})
{%- endmacro %}

{#- Content as candidates compare it: trimmed, whitespace runs folded to one space, lower case. -#}
{% macro normalised_content(content_expr) -%}
lower(regexp_replace(trim({{ content_expr }}), '\s+', ' ', 'g'))
{%- endmacro %}

{#- A memory's id in the current scheme (prefix mem2_): user, kind, normalised content. -#}
{% macro memory_id_key(user_expr, kind_expr, normalised_expr) -%}
'mem2_' || {{ id_hash([user_expr, kind_expr, normalised_expr]) }}
{%- endmacro %}

{#- The id the same memory had in the legacy scheme (prefix mem_, ambiguous across users). Only
    stores whose candidates already have legacy ids keep making them (int_memory_candidates);
    tombstones and access events of legacy ids are matched through it after a migration. -#}
{% macro legacy_memory_id_key(user_expr, kind_expr, normalised_expr) -%}
'mem_' || md5(concat_ws('|', {{ user_expr }}, {{ kind_expr }}, {{ normalised_expr }}))
{%- endmacro %}

{#- SQL condition: id_expr is a legacy-scheme memory id. -#}
{% macro is_legacy_memory_id(id_expr) -%}
(left({{ id_expr }}, 4) = 'mem_')
{%- endmacro %}

{#- The message_id of a landed row (raw text columns): the given one, trimmed, else a hash of
    the row. legacy=true gives the hash of earlier versions ('m_', concat_ws), kept by stores
    that already hold such ids (int_messages_validated); else the unambiguous 'm2_' hash. A
    message's identity is (user_id, message_id): ids are unique per user, not across users. -#}
{% macro resolved_message_id(row, legacy) -%}
coalesce(
    nullif(trim({{ row }}message_id), ''),
    {% if legacy == true -%}
    'm_' || md5(concat_ws('|', {{ row }}user_id, {{ row }}session_id, {{ row }}msg_seq, {{ row }}ts, {{ row }}content))
    {%- elif legacy == false -%}
    'm2_' || {{ id_hash([row ~ 'user_id', row ~ 'session_id', row ~ 'msg_seq', row ~ 'ts', row ~ 'content']) }}
    {%- else -%}
    case when {{ legacy }}
        then 'm_' || md5(concat_ws('|', {{ row }}user_id, {{ row }}session_id, {{ row }}msg_seq, {{ row }}ts, {{ row }}content))
        else 'm2_' || {{ id_hash([row ~ 'user_id', row ~ 'session_id', row ~ 'msg_seq', row ~ 'ts', row ~ 'content']) }}
    end
    {%- endif %}
)
{%- endmacro %}
