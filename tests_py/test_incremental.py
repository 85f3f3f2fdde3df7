"""A second build with no new messages adds and re-embeds nothing; new messages are embedded
once; strength is a function of (events, as_of), not of how many builds ran."""

from __future__ import annotations

from recall_shim import MemoryStore

from .conftest import DEMO_LOG, query


def _state(store: MemoryStore) -> tuple:
    return query(
        store,
        "select (select count(*) from long_term_memory), (select count(*) from int_memory_embeddings),"
        " (select max(embedded_at) from int_memory_embeddings), (select count(*) from session_log),"
        " (select count(*) from int_memories_extracted)",
    )[0]


def test_second_build_is_a_noop_and_new_messages_embed_once(fresh_store: MemoryStore) -> None:
    fresh_store.ingest(DEMO_LOG)
    fresh_store.build()
    first = _state(fresh_store)
    assert first[0] > 0 and first[1] > 0
    fresh_store.build()
    assert _state(fresh_store) == first, "a build with no new messages changed extraction or embeddings"

    fresh_store.remember("demo", "I prefer answers in English.", session_id="s9", msg_seq=1,
                         ts="2026-11-20 09:00:00", message_id="demo-s9-1")
    fresh_store.build()
    after = _state(fresh_store)
    # one new message: an extracted preference and an episode, each embedded once
    assert after[0] == first[0] + 2 and after[1] == first[1] + 2 and after[3] == first[3] + 1
    assert after[2] > first[2]
    # the old embeddings kept their embedded_at: only the new text was embedded
    assert query(fresh_store, "select count(*) from int_memory_embeddings where embedded_at = ?", [first[2]])[0][0] == first[1]
    sources = query(fresh_store, "select kind, source_message_ids from long_term_memory where content like '%English%'"
                                 " order by kind")
    assert sources == [("episode", ["demo-s9-1"]), ("preference", ["demo-s9-1"])]


def test_strength_is_the_same_after_one_build_or_daily_builds(tmp_path) -> None:
    once = MemoryStore(tmp_path / "once.duckdb")
    daily = MemoryStore(tmp_path / "daily.duckdb")
    for s in (once, daily):
        s.ingest(DEMO_LOG)
    for day in ("2026-11-09", "2026-11-10", "2026-11-11", "2026-11-12"):
        daily.build(vars={"as_of": f"{day} 12:00:00"})
    once.build(vars={"as_of": "2026-11-12 12:00:00"})
    sql = "select memory_id, strength from long_term_memory order by memory_id"
    a, b = query(once, sql), query(daily, sql)
    assert a == b
    # and the value is the reference design's decay: created 2026-11-08 10:00, 4 days 2 h later
    pref = dict(a)
    demo_pref = query(once, "select memory_id from long_term_memory where content like '用户偏好%'")[0][0]
    assert abs(pref[demo_pref] - 0.95 ** (4 + 2 / 24)) < 1e-9
