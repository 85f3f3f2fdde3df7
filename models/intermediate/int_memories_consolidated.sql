{#- One row per memory (memory_id). Candidates of one user and kind whose embeddings reach
    var consolidation_min_sim are one memory: each candidate joins the earliest candidate it is
    that close to, which gives the memory its id and content; provenance and mentions are the
    union. Episodes and slot values are never merged (each message is its own episode). Among
    the memories of one user, slot and entity the most recently mentioned is current; the others
    get valid_to (supersession; a negation is a newer value that ends the old one). An episode
    whose messages stated slot values that are all superseded gets valid_to too (it carries only
    outdated values, so it cannot outrank the current one). So does an episode that a later
    message announcing a change (seeds/change_markers.csv) shares a rare topic term with (var
    change_topic_max_df): the change the
    rules did not extract still ends the old statement, and so do the memories of that message
    whose content names the topic.
    Memories forgotten by id (stg_forget_requests) never come back.

    Incremental (delete+insert on memory_id; docs/serving.md "Incremental builds"): only users
    with candidates changed since the last run are read, and only their NEW candidates are
    compared with the user's candidates of the same kind (O(new x user's candidates), not the
    whole store's pairs). An existing candidate keeps its memory (candidate_ids); a new one joins
    the memory of the earliest candidate it is close to (chain to the root, as in a full build).
    When that could change an existing candidate's pick (a new candidate is close to a LATER
    existing one, or a candidate's first mention moved earlier) the user is recomputed in full
    (full_user) and the post-hook deletes that user's memories the recomputation no longer has.
    Written rows: memories with a changed candidate, memories whose valid_to changed, and every
    memory of a recomputed user; consolidated_at is the run that wrote the row. -#}
{%- set run_ts = "'" ~ run_started_at.strftime("%Y-%m-%d %H:%M:%S.%f") ~ "'::timestamp" -%}
{%- set hook_ts = "'" ~ "{{ run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f') }}" ~ "'::timestamp" -%}
{{ config(
    materialized='incremental',
    incremental_strategy='delete+insert',
    unique_key='memory_id',
    indexes=lookup_indexes([['memory_id'], ['consolidated_at'], ['user_id']]),
    post_hook=["
      delete from {{ this }}
      where user_id in (select r.user_id from {{ this }} as r where r.consolidated_at = " ~ hook_ts ~ " and r.full_user)
        and consolidated_at < " ~ hook_ts ~ "
    "],
) }}

with recursive
{% if is_incremental() %}
last_run as (
    select coalesce(max(consolidated_at), '-infinity'::timestamp) as consolidated_at from {{ this }}
),

changed as (
    select c.candidate_id, c.user_id, c.reordered
    from {{ ref('int_memory_candidates') }} as c
    where c.loaded_at > (select lr.consolidated_at from last_run as lr)
),

prior as (
    select
        unnest(m.candidate_ids) as candidate_id,
        m.memory_id
    from {{ this }} as m
    where m.user_id in (select ch.user_id from changed as ch)
),
{% endif %}

-- embeddings are read only where a comparison needs them (episodes are never merged), and for
-- the rows this run writes (final select): not for every candidate of a touched user
-- (membership tests outside a WHERE conjunction are joins, here and below: PostgreSQL runs
-- `x in (select ...)` in a select list, CASE or OR as a subplan that it rescans for every row
-- once the subquery outgrows work_mem; at 1M memories that made this model's increment run for
-- more than 13 minutes, against 59 s as joins; docs/scaling_out.md)
candidates as materialized (
    select
        c.*,
        e.embedding,
        {% if is_incremental() -%}
            p.memory_id as prior_memory_id,
            p.candidate_id is null as is_new,
            chg.candidate_id is not null as is_changed
        {%- else -%}
            null::varchar as prior_memory_id,
            true as is_new,
            true as is_changed
        {%- endif %}
    from {{ ref('int_memory_candidates') }} as c
    left join {{ ref('int_memory_embeddings') }} as e
        on
            c.kind != 'episode'
            and e.embedding_key = {{ embedding_key('c.content', 'c.embedding_form') }}
    {% if is_incremental() -%}
        left join prior as p on p.candidate_id = c.candidate_id
        left join changed as chg on chg.candidate_id = c.candidate_id
    {%- endif %}
    where
        -- a candidate without an embedding is not a memory yet (as before: embedded next build)
        {{ embedding_key('c.content', 'c.embedding_form') }} in (
            select k.embedding_key from {{ ref('int_memory_embeddings') }} as k
        )
        and {% if is_incremental() %}c.user_id in (select ch.user_id from changed as ch){% else %}true{% endif %}
),

-- new candidates against every candidate of their user and kind
near_new as materialized (
    {% if is_incremental() -%}
        select
            n.user_id,
            n.candidate_id,
            o.candidate_id as other_id,
            o.created_at as other_created_at,
            o.is_new as other_is_new,
            (o.created_at, o.candidate_id) < (n.created_at, n.candidate_id) as other_is_earlier
        from candidates as n
        inner join candidates as o
            on
                n.user_id = o.user_id
                and n.kind = o.kind
                and n.kind != 'episode'
                and n.candidate_id != o.candidate_id
                and {{ same_thing('n', 'o') }}
                and {{ vector_cosine('n.embedding', 'o.embedding') }} >= {{ number_var('consolidation_min_sim') }}
        where n.is_new
    {%- else -%}
        -- a full build recomputes every user (near_pairs)
        select
            null::varchar as user_id,
            null::varchar as candidate_id,
            null::varchar as other_id,
            null::timestamp as other_created_at,
            true as other_is_new,
            true as other_is_earlier
        where false
    {%- endif %}
),

-- users whose existing assignments could change: recomputed from all their candidates
full_users as (
    {% if is_incremental() -%}
        select user_id from candidates where is_changed and not is_new and reordered
        union
        select user_id from near_new where not other_is_new and not other_is_earlier
    {%- else -%}
        select distinct user_id from candidates
    {%- endif %}
),

near_pairs as (
    -- full users: every candidate picks the earliest candidate it is close to
    select
        later.candidate_id,
        earlier.candidate_id as canonical_id,
        row_number() over (
            partition by later.candidate_id order by earlier.created_at, earlier.candidate_id
        ) as pick
    from candidates as later
    inner join candidates as earlier
        on
            later.user_id = earlier.user_id
            and later.kind = earlier.kind
            and later.kind != 'episode'
            and {{ same_thing('later', 'earlier') }}
            and (earlier.created_at, earlier.candidate_id) < (later.created_at, later.candidate_id)
            and {{ vector_cosine('later.embedding', 'earlier.embedding') }} >= {{ number_var('consolidation_min_sim') }}
    where later.user_id in (select fu.user_id from full_users as fu)
    union all
    -- other users: only new candidates pick (existing ones keep their memory)
    select
        candidate_id,
        other_id as canonical_id,
        row_number() over (partition by candidate_id order by other_created_at, other_id) as pick
    from near_new
    where other_is_earlier and not exists (select 1 from full_users as fu where fu.user_id = near_new.user_id)
),

-- follow the picks to the root (a candidate that joined none, or an existing candidate of a
-- user that is not recomputed, which keeps its memory): a chain c -> p -> q is one memory q,
-- so a memory always contains the candidate that names it
chain as (
    select
        candidate_id,
        case
            when is_new or fu.user_id is not null then candidate_id
            else prior_memory_id
        end as memory_id
    from candidates
    left join full_users as fu using (user_id)
    where not exists (select 1 from near_pairs as np where np.pick = 1 and np.candidate_id = candidates.candidate_id)
    union all
    select
        p.candidate_id,
        chain.memory_id
    from near_pairs as p
    inner join chain on p.canonical_id = chain.candidate_id
    where p.pick = 1
),

assigned as (
    select
        c.*,
        chain.memory_id
    from candidates as c
    inner join chain using (candidate_id)
),

merged as (
    select
        memory_id,
        any_value(user_id) as user_id,
        any_value(kind) as kind,
        {{ first_agg('slot', 'last_mentioned_at desc') }} as slot,
        {{ first_agg('entity', 'last_mentioned_at desc') }} as entity,
        {{ first_agg('polarity', 'last_mentioned_at desc') }} as polarity,
        any_value(happened_on) filter (where candidate_id = memory_id) as happened_on,
        any_value(happened_grain) filter (where candidate_id = memory_id) as happened_grain,
        any_value(content) filter (where candidate_id = memory_id) as content,
        any_value(embedding_form) filter (where candidate_id = memory_id) as embedding_form,
        min(created_at) as created_at,
        max(last_mentioned_at) as last_mentioned_at,
        {{ flatten_agg('source_message_ids', distinct=true) }} as source_message_ids,
        {{ flatten_agg('mentioned_at') }} as mentioned_at,
        count(*) as merged_candidates,
        {{ list_agg('candidate_id', 'candidate_id') }} as candidate_ids,
        bool_or(is_changed) as has_changed_candidate
    from assigned
    group by memory_id
),

slot_superseded as (
    select
        *,
        case
            when slot is not null
                then lead(last_mentioned_at) over (
                        partition by user_id, slot, coalesce(entity, '') order by last_mentioned_at, memory_id
                    )
        end as slot_valid_to
    from merged as mg
    where not {{ is_forgotten_memory(
        ref('stg_forget_requests'), 'mg.memory_id', 'mg.user_id', 'mg.kind', 'mg.content') }}
),

-- messages whose every slot value is superseded: their episodes carry only outdated values
-- (issue 14 item 3), so they end when the last of those values ended
ended_messages as (
    select
        sl.user_id,
        sl.message_id,
        max(sl.slot_valid_to) as ended_at
    from (
        select s.user_id, unnest(s.source_message_ids) as message_id, s.slot_valid_to
        from slot_superseded as s
        where s.kind != 'episode' and s.slot is not null
    ) as sl
    group by sl.user_id, sl.message_id
    having bool_and(sl.slot_valid_to is not null)
),

ended_episodes as (
    select
        ep.memory_id,
        max(em.ended_at) as ended_at,
        bool_and(em.message_id is not null) as all_ended
    from (
        select s.memory_id, s.user_id, unnest(s.source_message_ids) as message_id
        from slot_superseded as s
        where s.kind = 'episode'
    ) as ep
    left join ended_messages as em on em.user_id = ep.user_id and em.message_id = ep.message_id
    group by ep.memory_id
),

-- a change the rules did not extract (issue 14 item 3): a later user message with a clause that
-- announces a change (seeds/change_markers.csv kind 'marker': "not ... anymore", "I quit ...",
-- "我不再...", "跳槽了") ends every earlier episode of the user that shares a topic term of that
-- clause: a tokenize term of the clause (capitalised words, i.e. names, left out; Latin terms of 4+
-- letters and Han bigrams; no 'ignore' term of the seed) found in at most var
-- change_topic_max_df of the user's episodes (a drink, a habit, a job title; not a common word).
-- So does a memory of an ended message whose own content names that topic (its slot aside: a
-- changed habit or title the rules did not extract the new value of).
change_markers as (
    select kind, pattern from {{ ref('change_markers') }}
),

change_clauses as (
    select
        s.user_id,
        s.memory_id,
        s.created_at,
        c.clause
    from slot_superseded as s,
        unnest(regexp_split_to_array(s.content, '[，,。.!！?？;；:：]+')) as c (clause)
    where s.kind = 'episode'
        and exists (
            select 1 from change_markers as k
            where k.kind = 'marker' and {{ regexp_search('lower(c.clause)', 'k.pattern') }}
        )
),

episode_terms as (
    select distinct
        s.user_id,
        s.memory_id,
        s.last_mentioned_at,
        t.term
    from slot_superseded as s,
        unnest({{ tokenize('s.content') }}) as t (term)
    where s.kind = 'episode'
        -- only users with a change clause: the others' terms could end nothing
        and s.user_id in (select cc.user_id from change_clauses as cc)
),

term_df as (
    select
        user_id,
        term,
        count(distinct memory_id) as df
    from episode_terms
    group by user_id, term
),

topic_terms as (
    select distinct
        cc.user_id,
        cc.memory_id,
        cc.created_at,
        t.term
    from change_clauses as cc,
        unnest({{ tokenize("regexp_replace(cc.clause, '[A-Z][A-Za-z]*', ' ', 'g')") }}) as t (term)
    where (
        (length(t.term) >= 4 and not {{ regexp_search('t.term', "'^[0-9]+$'") }})
        or (length(t.term) = 2 and not {{ regexp_search('t.term', "'[a-z0-9]'") }})
    )
    and not exists (
        select 1 from change_markers as k
        where k.kind = 'ignore' and {{ regexp_full_match('t.term', 'k.pattern') }}
    )
),

changed_pairs as (
    select
        old.memory_id,
        tt.term,
        tt.created_at as ended_at
    from topic_terms as tt
    inner join term_df as d
        on
            d.user_id = tt.user_id
            and d.term = tt.term
            and d.df <= {{ number_var('change_topic_max_df') }}
    inner join episode_terms as old
        on
            old.user_id = tt.user_id
            and old.term = tt.term
            and old.memory_id != tt.memory_id
            and old.last_mentioned_at < tt.created_at
),

changed_episodes as (
    select
        memory_id,
        min(ended_at) as ended_at
    from changed_pairs
    group by memory_id
),

-- the ended messages, with the topic that ended them
changed_messages as (
    select
        s.user_id,
        unnest(s.source_message_ids) as message_id,
        cp.term,
        cp.ended_at
    from slot_superseded as s
    inner join changed_pairs as cp on cp.memory_id = s.memory_id
),

-- a memory of an ended message whose own content names the topic, last said before the change
-- ("User works as a UX designer" ends with "promoted to lead designer", "User works at Zalando"
-- of the same message stays)
changed_memories as (
    select
        mt.memory_id,
        min(cm.ended_at) as ended_at
    from (
        select
            s.memory_id,
            s.user_id,
            s.last_mentioned_at,
            src.message_id,
            t.term
        from slot_superseded as s,
            unnest(s.source_message_ids) as src (message_id),
            unnest({{ tokenize('s.content') }}) as t (term)
        where s.kind != 'episode'
            and s.user_id in (select cm.user_id from changed_messages as cm)
    ) as mt
    inner join changed_messages as cm
        on
            cm.user_id = mt.user_id
            and cm.message_id = mt.message_id
            and cm.term = mt.term
            and mt.last_mentioned_at < cm.ended_at
    group by mt.memory_id
),

superseded as (
    select
        s.*,
        coalesce(
            s.slot_valid_to,
            case when ee.all_ended then ee.ended_at end,
            ce.ended_at,
            cm.ended_at
        ) as valid_to
    from slot_superseded as s
    left join ended_episodes as ee on ee.memory_id = s.memory_id
    left join changed_episodes as ce on ce.memory_id = s.memory_id
    left join changed_memories as cm on cm.memory_id = s.memory_id
),

written as (
    select s.*
    from superseded as s
    {% if is_incremental() -%}
        left join {{ this }} as old on old.memory_id = s.memory_id
        left join full_users as fu on fu.user_id = s.user_id
        where
            s.has_changed_candidate
            or fu.user_id is not null
            or old.memory_id is null
            or s.valid_to is distinct from old.valid_to
    {%- endif %}
)

select
    s.memory_id,
    s.user_id,
    s.kind,
    s.slot,
    s.entity,
    s.polarity,
    s.content,
    e.embedding,
    s.embedding_form,
    s.created_at,
    s.last_mentioned_at,
    {{ list_length('s.mentioned_at') }} as mention_count,
    s.source_message_ids,
    s.mentioned_at,
    s.merged_candidates,
    s.created_at as valid_from,
    s.valid_to,
    s.happened_on,
    s.happened_grain,
    s.candidate_ids,
    {{ run_ts }} as consolidated_at,
    fu.user_id is not null as full_user
from written as s
left join full_users as fu on fu.user_id = s.user_id
inner join {{ ref('int_memory_embeddings') }} as e
    on e.embedding_key = {{ embedding_key('s.content', 's.embedding_form') }}
