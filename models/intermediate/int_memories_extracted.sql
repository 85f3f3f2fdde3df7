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

with recursive messages as (
    {{ new_messages_to_extract(ref('int_messages_validated'), string_list_var('extract_roles')) }}
),

text_rules as (
    select
        purpose,
        pattern,
        coalesce(replacement, '') as replacement,
        row_number() over (partition by purpose order by step, clause_rule_id) as step_no
    from {{ ref('clause_rules') }}
),

-- the split patterns ('list' and 'entity' rows are alternatives) and the number of rewrite steps
patterns as (
    select
        max(case when purpose = 'sentence' and step_no = 1 then {{ pg_regex('pattern') }} end) as sentence_pattern,
        {{ pg_regex("string_agg(case when purpose = 'list' then pattern end, '|')") }} as list_pattern,
        {{ pg_regex("string_agg(case when purpose = 'entity' then pattern end, '|')") }} as entity_pattern,
        count(case when purpose = 'message' then 1 end) as message_steps,
        count(case when purpose = 'clause' then 1 end) as clause_steps
    from text_rules
),

-- whole-message rewrites, one step per recursion level (the marker is never user text)
message_pass (message_id, user_id, message_at, loaded_at, content, step_no) as (
    select message_id, user_id, message_at, loaded_at, replace(content, '{{ clause_marker() }}', ' '), 0
    from messages
    union all
    select
        p.message_id,
        p.user_id,
        p.message_at,
        p.loaded_at,
        regexp_replace(p.content, {{ pg_regex('r.pattern') }}, r.replacement, 'g'),
        p.step_no + 1
    from message_pass as p
    inner join text_rules as r on r.purpose = 'message' and r.step_no = p.step_no + 1
),

sentences as (
    select
        p.message_id,
        p.user_id,
        p.message_at,
        p.loaded_at,
        trim(s.sentence) as sentence
    from message_pass as p,
        patterns as pt,
        unnest(regexp_split_to_array(p.content, pt.sentence_pattern)) as s (sentence)
    where p.step_no = pt.message_steps
        and length(trim(s.sentence)) > 1
),

clause_pass (message_id, user_id, message_at, loaded_at, sentence, clause_text, step_no) as (
    select message_id, user_id, message_at, loaded_at, sentence, sentence as clause_text, 0 as step_no
    from sentences
    union all
    select
        p.message_id,
        p.user_id,
        p.message_at,
        p.loaded_at,
        p.sentence,
        regexp_replace(p.clause_text, {{ pg_regex('r.pattern') }}, r.replacement, 'g'),
        p.step_no + 1
    from clause_pass as p
    inner join text_rules as r on r.purpose = 'clause' and r.step_no = p.step_no + 1
),

clauses as (
    select distinct
        p.message_id,
        p.user_id,
        p.message_at,
        p.loaded_at,
        p.sentence,
        trim(c.clause) as clause
    from clause_pass as p,
        patterns as pt,
        unnest(regexp_split_to_array(p.clause_text, '{{ clause_marker() }}')) as c (clause)
    where p.step_no = pt.clause_steps
        and length(trim(c.clause)) > 1
        and length(trim(c.clause)) <= {{ number_var('max_memory_chars') }}
),

rules as (
    select
        rule_id,
        kind,
        coalesce(slot, '') as slot,
        coalesce(entity, '') as entity,
        coalesce(polarity, 'positive') as polarity,
        coalesce(list_item, '') as list_item,
        priority,
        pattern,
        template
    from {{ ref('extraction_rules') }}
),

matched as (
    select
        c.*,
        r.rule_id,
        r.kind,
        r.polarity,
        r.list_item,
        r.pattern,
        regexp_split_to_array(
            regexp_replace(c.clause, {{ pg_regex('r.pattern') }}, r.template), '{{ clause_marker() }}'
        ) as contents,
        regexp_split_to_array(r.slot, '{{ clause_marker() }}') as slots,
        regexp_split_to_array(
            regexp_replace(c.clause, {{ pg_regex('r.pattern') }}, r.entity), '{{ clause_marker() }}'
        ) as entities,
        row_number() over (
            partition by c.user_id, c.message_id, c.sentence, c.clause, r.kind order by r.priority, r.rule_id
        ) as rule_rank
    from clauses as c
    inner join rules as r on {{ regexp_full_match('c.clause', 'r.pattern') }}
),

-- one row per statement of the template (a template may state several memories)
statements as (
    select
        m.*,
        trim(m.contents[i.n]) as statement,
        nullif(trim(case when {{ list_length('m.slots') }} = 1 then m.slots[1] else m.slots[i.n] end), '') as slot,
        trim(case when {{ list_length('m.entities') }} = 1 then m.entities[1] else m.entities[i.n] end) as entity_text,
        case
            when m.list_item != '' and m.contents[i.n] like '%{item}%'
                then regexp_replace(m.clause, {{ pg_regex('m.pattern') }}, m.list_item)
            else ''
        end as list_text
    from matched as m
    cross join lateral generate_series(1, {{ list_length('m.contents') }}) as i (n)
    where m.rule_rank = 1
),

-- a statement with {item} becomes one row per item of its list
items as (
    select
        s.*,
        trim(it.item) as item
    from statements as s,
        patterns as pt,
        unnest(regexp_split_to_array(s.list_text, pt.list_pattern)) as it (item)
),

extracted as (
    select
        i.message_id,
        i.user_id,
        i.message_at,
        i.loaded_at,
        i.sentence,
        i.clause,
        i.rule_id,
        i.kind,
        i.slot,
        i.polarity,
        trim(replace(i.statement, '{item}', i.item)) as content,
        nullif(trim(regexp_replace(lower(replace(i.entity_text, '{item}', i.item)), pt.entity_pattern, '', 'g')), '')
            as entity
    from items as i, patterns as pt
    where (i.item != '' or i.statement not like '%{item}%')
        and trim(replace(i.statement, '{item}', i.item)) != ''
),

time_rules as (
    select * from {{ ref('time_expressions') }}
),

-- the clause's own time expression first, else one that opens its sentence ("Last month, I
-- moved ..."); then the lowest priority
timed as (
    select
        e.*,
        t.grain as happened_grain,
        {{ resolve_happened_on('e.message_at', 't.grain', 't.shift', 't.weekday') }} as happened_on,
        row_number() over (
            partition by e.user_id, e.message_id, e.kind, e.content
            order by
                case
                    when t.time_rule_id is null then 2
                    when {{ time_expression_match('e.clause', 't.pattern') }} then 0
                    else 1
                end,
                t.priority,
                t.time_rule_id
        ) as time_rank
    from extracted as e
    left join time_rules as t
        on
            {{ time_expression_match('e.clause', 't.pattern') }}
            or {{ time_expression_match('e.sentence', 't.pattern', opening=true) }}
),

best_rule as (
    select
        *,
        row_number() over (partition by user_id, message_id, kind, content order by rule_id) as content_rank
    from timed
    where time_rank = 1
)

select
    'ext_' || {{ id_hash(['user_id', 'message_id', 'kind', 'content']) }} as extraction_id,
    message_id,
    user_id,
    rule_id,
    kind,
    slot,
    entity,
    polarity,
    content,
    happened_on,
    happened_grain,
    message_at,
    loaded_at
from best_rule
where content_rank = 1
