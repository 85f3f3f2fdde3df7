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

{#- The character that marks where a question mark stood (written before every run of ? / ？ in
    the message, removed from user text first like the clause marker), so that the clause it ends
    is still known to be a question after the sentence split dropped the question mark. -#}
{% macro question_marker() -%}⁇{%- endmacro %}

{#- True when the time expression pattern (seeds/time_expressions.csv, lower case, no \b: word
    edges are added here so the pattern reads the same on DuckDB and PostgreSQL) occurs in the
    text as whole words (opening: only at the start of the text). -#}
{% macro time_expression_match(text_expr, pattern_expr, opening=false) -%}
{%- set head = "" if opening else "(?:^|.*[^a-z])" -%}
{%- if pattern_expr.startswith("'") and pattern_expr.endswith("'") -%}
{#- a string literal (macros/rule_patterns.sql): the whole pattern one literal, compiled once -#}
{{ regexp_full_match('lower(' ~ text_expr ~ ')', "'" ~ head ~ "(?:" ~ pattern_expr[1:-1] ~ ")(?:[^a-z].*)?'") }}
{%- else -%}
{{ regexp_full_match('lower(' ~ text_expr ~ ')', "'" ~ head ~ "(?:' || " ~ pattern_expr ~ " || ')(?:[^a-z].*)?'") }}
{%- endif -%}
{%- endmacro %}

{#- The day a time expression resolves to against the message time: grain day (message day +
    shift days), week (Monday of the message week + shift weeks, + weekday - 1 days when a
    weekday 1-7 is given), month / year (first day, + shift), weekday (the next (shift > 0) or
    previous (shift < 0) such weekday, never the message day itself). A month of the year (grain
    month with month 1-12 set: "in May", "五月份") is the first day of that month in the year
    text_expr names (the first 19xx / 20xx in it: "in May 2023", "2023年5月"), else in the year of
    the message time. NULL when grain is NULL. -#}
{% macro resolve_happened_on(at_expr, grain_expr, shift_expr, weekday_expr, month_expr='null', text_expr='null') -%}
{%- set day = 'cast(' ~ at_expr ~ ' as date)' -%}
{%- set dow = 'cast(extract(isodow from ' ~ at_expr ~ ') as integer)' -%}
case {{ grain_expr }}
    when 'day' then {{ day }} + {{ shift_expr }}
    when 'week' then cast(date_trunc('week', {{ at_expr }}) as date) + 7 * {{ shift_expr }} + coalesce({{ weekday_expr }} - 1, 0)
    when 'month' then case
        when {{ month_expr }} is not null then make_date(
            coalesce({{ year_in_text(text_expr) }}, cast(extract(year from {{ at_expr }}) as integer)),
            cast({{ month_expr }} as integer), 1)
        else cast(date_trunc('month', {{ at_expr }}) + {{ shift_expr }} * interval '1 month' as date)
    end
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

{#- Episode and assistant memory candidates (int_episodes_extracted's rows; the hot tail's
    statement runs the same, macros/tail.sql): every message of episode_messages with at least
    var episode_min_terms terms, verbatim up to var max_episode_chars, as an 'episode'; every
    message of assistant_messages (none when it is none) that carries a keep marker of markers
    (seeds/assistant_markers.csv: pattern, keep) and no drop marker, the same way, as an
    'assistant' memory. episode_messages, assistant_messages: relations or parenthesised
    subqueries with message_id, user_id, content, message_at, loaded_at. -#}
{% macro episode_extractions(episode_messages, assistant_messages, markers) -%}
with messages as (
    select *
    from {{ episode_messages }} as em
    where {{ list_length(tokenize('em.content')) }} >= {{ number_var('episode_min_terms') }}
),

markers as (
    select
        pattern,
        keep
    from {{ markers }}
),

assistant_messages as (
    {% if assistant_messages is not none -%}
        select * from {{ assistant_messages }} as am
    {%- else -%}
        select
            null::varchar as message_id,
            null::varchar as user_id,
            null::varchar as content,
            null::timestamp as message_at,
            null::timestamp as loaded_at
        where false
    {%- endif %}
),

assistant_said as (
    select a.*
    from assistant_messages as a
    where {{ list_length(tokenize('a.content')) }} >= {{ number_var('episode_min_terms') }}
        and exists (
            select 1 from markers as k
            where k.keep and {{ regexp_search('lower(a.content)', 'k.pattern') }}
        )
        and not exists (
            select 1 from markers as k
            where not k.keep and {{ regexp_search('lower(a.content)', 'k.pattern') }}
        )
)

select
    'ext_' || {{ id_hash(['user_id', 'message_id', "'episode'"]) }} as extraction_id,
    message_id,
    user_id,
    'episode' as rule_id,
    'episode' as kind,
    null::varchar as slot,
    left(trim(content), {{ number_var('max_episode_chars') }}) as content,
    message_at,
    loaded_at
from messages
union all
select
    'ext_' || {{ id_hash(['user_id', 'message_id', "'assistant'"]) }} as extraction_id,
    message_id,
    user_id,
    'assistant' as rule_id,
    'assistant' as kind,
    null::varchar as slot,
    left(trim(content), {{ number_var('max_episode_chars') }}) as content,
    message_at,
    loaded_at
from assistant_said
{%- endmacro %}

{#- SQL boolean: the memory is an episode that asks a question (it ends with ? or ？), which
    recall weighs by var question_episode_weight (long_term_memory's is_question, and the hot
    tail's, macros/tail.sql). -#}
{% macro is_question_memory(kind_expr, content_expr) -%}
{{ kind_expr }} = 'episode' and {{ regexp_search(content_expr, "'[?？]\\s*$'") }}
{%- endmacro %}

{#- A recursive CTE `cte` (keys..., text_column, step_no) that applies the clause_rules of
    `purpose` to text_column one step per recursion level, starting from start_expr over `source`
    at step 0 (PostgreSQL compiles one pattern per level); the finished text is at step_no = the
    purpose's number of steps (rule_extractions' `patterns`). seed: the clause_rules relation,
    read at compile time where possible (macros/rule_patterns.sql). -#}
{% macro rewrite_steps(cte, source, keys, text_column, start_expr, purpose, seed=none) -%}
{{ cte }} ({{ keys | join(', ') }}, {{ text_column }}, step_no) as (
    select
        {%- for k in keys %}
        {{ k }},
        {%- endfor %}
        {{ start_expr }} as {{ text_column }},
        0 as step_no
    from {{ source }}
    union all
    select
        {%- for k in keys %}
        p.{{ k }},
        {%- endfor %}
        {{ clause_rule_rewrite('p.' ~ text_column, 'r', seed, purpose) }},
        p.step_no + 1
    from {{ cte }} as p
    inner join text_rules as r on r.purpose = '{{ purpose }}' and r.step_no = p.step_no + 1
)
{%- endmacro %}


{#- rule_extractions' conditions on a rule's pattern (a column or a constant: pattern_rule_join,
    macros/rule_patterns.sql) for clause c, span s. -#}
{% macro clause_full_match(pattern_expr) -%}{{ regexp_full_match('c.clause', pattern_expr) }}{%- endmacro %}

{% macro clause_search(pattern_expr) -%}{{ regexp_search('c.clause', pattern_expr) }}{%- endmacro %}

{#- a time expression in the clause, or opening its sentence -#}
{% macro span_time_match(pattern_expr) -%}
{{ time_expression_match('s.clause', pattern_expr) }} or {{ time_expression_match('s.sentence', pattern_expr, opening=true) }}
{%- endmacro %}

{#- Rule extractions of messages (int_memories_extracted's rows; the hot tail's statement runs the
    same, macros/tail.sql): see that model for the rules. messages: relation or parenthesised
    subquery with message_id, user_id, content, message_at, loaded_at; clause_rules,
    extraction_rules, time_expressions: the seeds' rows; seeds: the seeds' relations (refs) to
    read the rules' patterns from at compile time where those are names of copies (the hot
    tail's tables; macros/rule_patterns.sql). -#}
{% macro rule_extractions(messages, clause_rules, extraction_rules, time_expressions, seeds=none) -%}
{%- set seeds = seeds or {'clause_rules': clause_rules, 'extraction_rules': extraction_rules,
                          'time_expressions': time_expressions} -%}
with recursive messages as (
    select * from {{ messages }} as nm
),

text_rules as (
    select
        clause_rule_id,
        purpose,
        pattern,
        coalesce(replacement, '') as replacement,
        row_number() over (partition by purpose order by step, clause_rule_id) as step_no
    from {{ clause_rules }}
),

-- the split patterns ('list' and 'entity' rows are alternatives) and the number of rewrite steps
patterns as (
    select
        max(case when purpose = 'sentence' and step_no = 1 then {{ pg_regex('pattern') }} end) as sentence_pattern,
        {{ pg_regex("string_agg(case when purpose = 'list' then pattern end, '|')") }} as list_pattern,
        {{ pg_regex("string_agg(case when purpose = 'entity' then pattern end, '|')") }} as entity_pattern,
        count(case when purpose = 'message' then 1 end) as message_steps,
        count(case when purpose = 'clause' then 1 end) as clause_steps,
        count(case when purpose = 'content' then 1 end) as content_steps
    from text_rules
),

-- whole-message rewrites, one step per recursion level (the markers are never user text; the
-- question marker goes before every run of question marks, so it survives the sentence split)
{{ rewrite_steps(
    'message_pass', 'messages', ['message_id', 'user_id', 'message_at', 'loaded_at'], 'content',
    "regexp_replace(replace(replace(content, '" ~ clause_marker() ~ "', ' '), '" ~ question_marker()
    ~ "', ' '), '([?？]+)', '" ~ question_marker() ~ "\\1', 'g')",
    'message', seeds.clause_rules
) }},

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

{{ rewrite_steps(
    'clause_pass', 'sentences', ['message_id', 'user_id', 'message_at', 'loaded_at', 'sentence'], 'clause_text',
    'sentence', 'clause', seeds.clause_rules
) }},

split_clauses as (
    select distinct
        p.message_id,
        p.user_id,
        p.message_at,
        p.loaded_at,
        trim(replace(p.sentence, '{{ question_marker() }}', '')) as sentence,
        trim(replace(c.clause, '{{ question_marker() }}', '')) as clause,
        strpos(c.clause, '{{ question_marker() }}') > 0 as asked
    from clause_pass as p,
        patterns as pt,
        -- a question asked after a comma is its own clause ("I'm allergic to shellfish, any ideas
        -- that are safe?"): the statement before it is not a question
        unnest(regexp_split_to_array(
            regexp_replace(
                p.clause_text,
                '\s*[,，]\s*([^,，{{ clause_marker() }}{{ question_marker() }}]*{{ question_marker() }})\s*$',
                '{{ clause_marker() }}\1'
            ),
            '{{ clause_marker() }}'
        )) as c (clause)
    where p.step_no = pt.clause_steps
),

-- a question states nothing about the user ("我喜欢什么?", "do you know what I like"): a clause
-- that ended with a question mark or matches a 'question' pattern and no 'request' pattern
-- ("can you answer in German?" states a preference) is left to its episode
clauses as {{ cte_materialized() }} (
    select
        c.message_id,
        c.user_id,
        c.message_at,
        c.loaded_at,
        c.sentence,
        c.clause
    from split_clauses as c
    where length(c.clause) > 1
        and length(c.clause) <= {{ number_var('max_memory_chars') }}
        and not (
            (
                c.asked
                or {{ any_pattern_rule('text_rules', 'q', "q.purpose = 'question'", clause_search,
                                       seeds.clause_rules, "purpose = 'question'") }}
            )
            and not {{ any_pattern_rule('text_rules', 'r', "r.purpose = 'request'", clause_search,
                                        seeds.clause_rules, "purpose = 'request'") }}
        )
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
    from {{ extraction_rules }}
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
    from {{ pattern_rule_join('rules', 'r', 'clauses', 'c', clause_full_match, seeds.extraction_rules, 'rule_id') }}
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

extracted_raw as (
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

-- the 'content' rewrites, one step per recursion level: a clean third-person statement ("User lost
-- my job" -> "User lost their job"; seeds/clause_rules.csv)
{{ rewrite_steps(
    'content_pass', 'extracted_raw',
    ['message_id', 'user_id', 'message_at', 'loaded_at', 'sentence', 'clause', 'rule_id', 'kind', 'slot',
     'polarity', 'entity'],
    'content', 'content', 'content', seeds.clause_rules
) }},

extracted as (
    select
        p.message_id,
        p.user_id,
        p.message_at,
        p.loaded_at,
        p.sentence,
        p.clause,
        p.rule_id,
        p.kind,
        p.slot,
        p.polarity,
        trim(p.content) as content,
        p.entity
    from content_pass as p, patterns as pt
    where p.step_no = pt.content_steps
),

time_rules as (
    select * from {{ time_expressions }}
),

-- the texts time expressions are looked for in: each extraction's clause and sentence
spans as {{ cte_materialized() }} (
    select distinct
        clause,
        sentence
    from extracted
),

-- every time expression found in a clause, or opening its sentence
time_hits as (
    select
        s.clause,
        s.sentence,
        t.time_rule_id,
        t.priority,
        t.grain,
        t.shift,
        t.weekday,
        t.month,
        {{ time_expression_match('s.clause', 't.pattern') }} as in_clause
    -- few spans name a time: the rules' pattern column is matched only on those
    from {{ pattern_rule_join('time_rules', 't',
        rows_any_pattern_may_match('spans', 's', span_time_match, seeds.time_expressions), 's', span_time_match) }}
),

-- the clause's own time expression first, else one that opens its sentence ("Last month, I
-- moved ..."); then the lowest priority
timed as (
    select
        e.*,
        h.grain as happened_grain,
        {{ resolve_happened_on('e.message_at', 'h.grain', 'h.shift', 'h.weekday', 'h.month', 'h.sentence') }} as happened_on,
        row_number() over (
            partition by e.user_id, e.message_id, e.kind, e.content
            order by
                case
                    when h.time_rule_id is null then 2
                    when h.in_clause then 0
                    else 1
                end,
                h.priority,
                h.time_rule_id
        ) as time_rank
    from extracted as e
    left join time_hits as h
        on e.clause = h.clause and e.sentence = h.sentence
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
{%- endmacro %}
