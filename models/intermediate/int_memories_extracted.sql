{#- One row per (message, kind, content) that an extraction rule matched in one clause of a user
    message: a candidate memory. How a message becomes clauses is data (seeds/clause_rules.csv):
    'message' rewrites run on the whole message in step order, the 'sentence' pattern splits it
    into sentences, 'clause' rewrites run on each sentence in step order and mark clause
    boundaries with the clause marker (‖), so every clause is matched on its own. A clause can
    yield one memory per kind (lowest rule priority wins); a rule's template may state several
    memories (‖-separated, with parallel slot and entity lists), and a rule with list_item
    splits that part of the clause at the 'list' separators into one memory per item ({item}).
    entity (lower case, 'entity' clean-ups applied) says which thing of a slot the memory is
    about: supersession is by (slot, entity) in int_memories_consolidated. happened_on is the
    day the clause (or else the opening of its sentence) says the thing happened (seeds/time_expressions.csv,
    resolved against the message time), with happened_grain (day, week, month, year).
    Incremental: only messages loaded since the last run are read, so old messages are never
    re-extracted (edit rules -> rebuild this model with --full-refresh). extraction_id is
    unambiguous over (user_id, message_id, kind, content) (macros/identity.sql; ids of earlier
    versions, a bare md5, stay as they are and cannot equal a new 'ext_' id). -#}
{{ config(materialized='incremental', incremental_strategy='append') }}

{{ rule_extractions(
    '(' ~ new_messages_to_extract(ref('int_messages_validated'), string_list_var('extract_roles')) ~ ')',
    ref('clause_rules'), ref('extraction_rules'), ref('time_expressions')
) }}
