"""Retention: a var-driven policy, run by dbt build, takes old memories at the strength floor out of
recall (archive or drop); kinds outside var retention_kinds and active memories stay."""

from __future__ import annotations

import pytest

from recall_shim import BuildFailed, MemoryStore

from .conftest import query

AS_OF = "2026-06-01 00:00:00"
POLICY = {"as_of": AS_OF, "retention_days": 30, "retention_kinds": ["fact"]}


def _contents(store: MemoryStore, relation: str) -> set[str]:
    return {r[0] for r in query(store, f"select content from {relation} where user_id = 'ret'")}


def _recalled(store: MemoryStore) -> set[str]:
    return {m.content for m in store.recall("tell me about the user", user_id="ret", min_sim=-1, top_k=50,
                                            record_access=False)}


def test_retention_archives_or_drops_old_memories_at_the_floor(fresh_store: MemoryStore) -> None:
    store = fresh_store
    store.remember_many([
        {"user_id": "ret", "session_id": "s1", "msg_seq": 1, "role": "user", "content": "I live in Oldtown.",
         "ts": "2026-01-01 10:00:00", "message_id": "old-fact"},
        {"user_id": "ret", "session_id": "s1", "msg_seq": 2, "role": "user", "content": "I have a parrot.",
         "ts": "2026-01-01 10:00:00", "message_id": "old-fact-2"},
        # a preference and, as the whole message, an episode
        {"user_id": "ret", "session_id": "s1", "msg_seq": 3, "role": "user", "content": "I prefer jasmine tea.",
         "ts": "2026-01-01 10:00:00", "message_id": "old-pref"},
        {"user_id": "ret", "session_id": "s2", "msg_seq": 1, "role": "user", "content": "I have a telescope.",
         "ts": "2026-01-01 10:00:00", "message_id": "revived-1"},
        {"user_id": "ret", "session_id": "s9", "msg_seq": 1, "role": "user", "content": "I have a telescope.",
         "ts": "2026-05-25 10:00:00", "message_id": "revived-2"},
        {"user_id": "ret", "session_id": "s9", "msg_seq": 2, "role": "user", "content": "I work as a baker.",
         "ts": "2026-05-30 10:00:00", "message_id": "new-fact"},
    ])
    episode = "I prefer jasmine tea."
    old_facts = {"User lives in Oldtown", "User has a parrot"}
    everything = old_facts | {"User prefers jasmine tea", "User has a telescope", "User works as a baker", episode}

    store.build(vars={"as_of": AS_OF})  # retention_days null (the default): everything stays
    assert _contents(store, "long_term_memory") == everything and _contents(store, "memory_archive") == set()

    store.build(vars={"as_of": AS_OF, "retention_days": 30})  # default kinds: episodes; default action: archive
    assert _contents(store, "memory_archive") == {episode}
    assert _recalled(store) == everything - {episode}

    store.build(vars=POLICY)  # facts only
    assert _contents(store, "memory_archive") == old_facts
    assert _contents(store, "long_term_memory") == everything - old_facts
    assert _recalled(store) == everything - old_facts
    floor = query(store, "select min(strength), max(strength) from memory_archive")[0]
    assert floor == (pytest.approx(0.3), pytest.approx(0.3))
    actions = dict(query(store, "select retention_action, count(*) from int_memory_retention group by all"))
    assert actions == {"archive": 2, "keep": len(everything) - 2}

    store.build(vars={**POLICY, "retention_action": "drop"})
    assert _contents(store, "memory_archive") == set()
    assert _contents(store, "long_term_memory") == everything - old_facts and _recalled(store) == everything - old_facts

    with pytest.raises(BuildFailed) as exc:
        store.build(vars={**POLICY, "retention_action": "shred"})
    assert "retention_action must be archive or drop" in exc.value.output
