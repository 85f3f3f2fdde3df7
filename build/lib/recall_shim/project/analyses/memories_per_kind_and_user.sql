-- Memories per kind and user.
-- One row per (user_id, kind): current and superseded memories, mean strength of the current
-- ones, how often they were mentioned and recalled, and when the first and last were created.
-- Run: dbt compile, then the SQL in target/compiled/agent_memory/analyses/ (or paste it).
select
    user_id,
    kind,
    count(*) filter (where valid_to is null) as current_memories,
    count(*) filter (where valid_to is not null) as superseded_memories,
    round(avg(strength) filter (where valid_to is null), 3) as mean_strength,
    sum(mention_count) as mentions,
    sum(access_count) as accesses,
    min(created_at) as first_created_at,
    max(created_at) as last_created_at
from {{ ref('long_term_memory') }}
group by user_id, kind
order by user_id, kind
