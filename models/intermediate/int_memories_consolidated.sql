{#- One row per memory (memory_id). Candidates of one user and kind whose embeddings reach
    var consolidation_min_sim are one memory: each candidate joins the earliest candidate it is
    that close to, which gives the memory its id and content; provenance and mentions are the
    union. Episodes are never merged (each message is its own episode). In a slot, the most
    recently mentioned memory is current; the others get valid_to (supersession).
    Memories forgotten by id (stg_forget_requests) never come back. -#}
with recursive candidates as (
    select
        c.*,
        e.embedding
    from {{ ref('int_memory_candidates') }} as c
    inner join {{ ref('int_memory_embeddings') }} as e
        on e.embedding_key = {{ embedding_key('c.content', 'c.embedding_form') }}
),

near_pairs as (
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
            and (earlier.created_at, earlier.candidate_id) < (later.created_at, later.candidate_id)
            and {{ vector_cosine('later.embedding', 'earlier.embedding') }} >= {{ var('consolidation_min_sim') }}
),

-- follow the picks to the root (a candidate that joined none): a chain c -> p -> q is one
-- memory q, so a memory always contains the candidate that names it
chain as (
    select candidate_id, candidate_id as memory_id
    from candidates
    where candidate_id not in (select candidate_id from near_pairs where pick = 1)
    union all
    select p.candidate_id, chain.memory_id
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
        any_value(content) filter (where candidate_id = memory_id) as content,
        any_value(embedding) filter (where candidate_id = memory_id) as embedding,
        any_value(embedding_form) filter (where candidate_id = memory_id) as embedding_form,
        min(created_at) as created_at,
        max(last_mentioned_at) as last_mentioned_at,
        {{ flatten_agg('source_message_ids', distinct=true) }} as source_message_ids,
        {{ flatten_agg('mentioned_at') }} as mentioned_at,
        count(*) as merged_candidates
    from assigned
    group by memory_id
),

superseded as (
    select
        *,
        case
            when slot is not null
                then lead(last_mentioned_at) over (
                        partition by user_id, slot order by last_mentioned_at, memory_id
                    )
        end as valid_to
    from merged
    where not {{ is_forgotten_memory('memory_id') }}
)

select
    memory_id,
    user_id,
    kind,
    slot,
    content,
    embedding,
    embedding_form,
    created_at,
    last_mentioned_at,
    {{ list_length('mentioned_at') }} as mention_count,
    source_message_ids,
    mentioned_at,
    merged_candidates,
    created_at as valid_from,
    valid_to
from superseded
