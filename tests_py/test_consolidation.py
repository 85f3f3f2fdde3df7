"""Repeated statements consolidate into one memory; slots supersede; history stays queryable."""

from __future__ import annotations

import pytest

from recall_shim import MemoryStore

from .conftest import query


def _say(store: MemoryStore, user: str, rows: list[tuple[str, str, str]]) -> None:
    store.remember_many(
        {"user_id": user, "session_id": sid, "msg_seq": i, "role": "user", "content": text, "ts": ts,
         "message_id": f"{user}-{sid}-{i}"}
        for i, (sid, ts, text) in enumerate(rows, start=1)
    )


def test_repeats_are_one_memory_and_slots_supersede(fresh_store: MemoryStore) -> None:
    _say(fresh_store, "ana", [
        ("s1", "2026-03-01 09:00:00", "I prefer tables."),
        ("s2", "2026-03-08 09:00:00", "I prefer tables"),
        ("s3", "2026-03-15 09:00:00", "I prefer  Tables!"),
        ("s1", "2026-03-01 09:05:00", "I live in Lyon."),
        ("s3", "2026-03-15 09:05:00", "I moved to Paris."),
        ("s1", "2026-03-01 09:06:00", "I prefer dark mode."),
    ])
    fresh_store.build(vars={"as_of": "2026-03-16 09:00:00"})
    rows = query(fresh_store, "select content, mention_count, source_message_ids, strength, valid_to from long_term_memory"
                              " where user_id = 'ana' and kind != 'episode' order by content")
    by = {r[0]: r[1:] for r in rows}
    tables = [k for k in by if k.lower().startswith("user prefers tables")]
    assert len(tables) == 1, by.keys()
    count, sources, strength, _ = by[tables[0]]
    assert count == 3 and sources == ["ana-s1-1", "ana-s2-2", "ana-s3-3"]
    # the repeats reinforce: stronger than a preference said once at the same time as the first
    assert strength > by["User prefers dark mode"][2]
    assert by["User lives in Lyon"][3] is not None and by["User lives in Paris"][3] is None
    # superseded memories are not recalled by default; analysts still see them
    hits = fresh_store.recall("where does the user live?", user_id="ana", min_sim=-1, top_k=20, record_access=False)
    assert "User lives in Paris" in [h.content for h in hits]
    assert "User lives in Lyon" not in [h.content for h in hits]


# users bo and cy, built once with the default vars (each test reads only its own user)
SAID = {
    "bo": [
        ("s1", "2026-05-01 10:00:00", "Big news: we adopted a beagle puppy yesterday and named him Biscuit."),
        ("s1", "2026-05-01 10:01:00", "ok thanks"),
        ("s2", "2026-05-02 10:00:00", "How often should a puppy eat?"),
    ],
    "cy": [
        ("s1", "2026-06-01 10:00:00", "My licence plate is QX-4471-ZT, please remember it for the parking form."),
        ("s1", "2026-06-01 10:02:00", "We drove to the coast last weekend and parked near the harbour."),
        ("s2", "2026-06-02 10:00:00", "我的车牌号是京A12345，停车的时候要用。"),
    ],
}


@pytest.fixture(scope="module")
def said_store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    store = MemoryStore(tmp_path_factory.mktemp("said") / "said.duckdb")
    for user, rows in SAID.items():
        _say(store, user, rows)
    store.build()
    return store


def test_episodes_are_recalled_and_filterable(said_store: MemoryStore) -> None:
    kinds = dict(query(said_store, "select content, kind from long_term_memory where user_id = 'bo'"))
    assert kinds["Big news: we adopted a beagle puppy yesterday and named him Biscuit."] == "episode"
    assert "ok thanks" not in kinds  # too short to be an episode (episode_min_terms)
    hits = said_store.recall("what is the dog called?", user_id="bo", min_sim=-1, record_access=False)
    assert hits[0].content.startswith("Big news") and hits[0].source_message_ids == ["bo-s1-1"]
    assert said_store.recall("what is the dog called?", user_id="bo", min_sim=-1, kinds=["fact"],
                             record_access=False) == []
    flags = dict(query(said_store, "select content, is_question from long_term_memory where user_id = 'bo'"))
    assert flags["How often should a puppy eat?"] is True


def test_lexical_leg_and_term_index(said_store: MemoryStore) -> None:
    terms = {r[0] for r in query(said_store, "select term from memory_term_index where user_id = 'cy'")}
    assert {"qx", "4471", "zt", "licence", "plate", "车牌", "牌号"} <= terms
    hit = said_store.recall("QX-4471-ZT", user_id="cy", min_sim=-1, top_k=1, record_access=False)[0]
    assert "QX-4471-ZT" in hit.content and hit.lexical_score > 0
    zh = said_store.recall("车牌号是多少", user_id="cy", min_sim=-1, top_k=1, record_access=False)[0]
    assert "京A12345" in zh.content and zh.lexical_score > 0
