"""A build with no new messages adds and re-embeds nothing; new messages are embedded once;
strength is a function of (events, as_of), not of how many builds ran; incremental consolidation
ends where one full build ends."""

from __future__ import annotations

import re

from recall_shim import MemoryStore

from .conftest import DEMO_LOG, query


def _state(store: MemoryStore) -> tuple:
    return query(
        store,
        "select (select count(*) from long_term_memory), (select count(*) from int_memory_embeddings),"
        " (select max(embedded_at) from int_memory_embeddings), (select count(*) from session_log),"
        " (select count(*) from int_memories_extracted)",
    )[0]


AS_OF = {"as_of": "2026-11-12 12:00:00"}  # the clock of every build here but the two earlier days: one parse


def test_builds_without_new_messages_change_nothing_new_messages_embed_once_and_strength_ignores_builds(
        tmp_path) -> None:
    """Daily builds with no new messages add and re-embed nothing and end with the strengths of one
    build at the last day; then one new message is extracted and embedded once."""
    once = MemoryStore(tmp_path / "once" / "store.duckdb")
    daily = MemoryStore(tmp_path / "daily" / "store.duckdb")
    for s in (once, daily):
        s.ingest(DEMO_LOG)
    daily.build(vars={"as_of": "2026-11-10 12:00:00"})
    first = _state(daily)
    assert first[0] > 0 and first[1] > 0
    for as_of in ({"as_of": "2026-11-11 12:00:00"}, AS_OF):  # dbt runs (new vars) with no new messages
        daily.build(vars=as_of)
        assert _state(daily) == first, "a build with no new messages changed extraction or embeddings"
    once.build(vars=AS_OF)
    sql = "select memory_id, strength from long_term_memory order by memory_id"
    a, b = query(once, sql), query(daily, sql)
    assert a == b
    # and the value is the reference design's decay: created 2026-11-08 10:00, 4 days 2 h later
    pref = dict(a)
    demo_pref = query(once, "select memory_id from long_term_memory where content like '用户偏好%'")[0][0]
    assert abs(pref[demo_pref] - 0.95 ** (4 + 2 / 24)) < 1e-9

    daily.remember("demo", "I prefer answers in English.", session_id="s9", msg_seq=1,
                   ts="2026-11-12 09:00:00", message_id="demo-s9-1")
    daily.build(vars=AS_OF)
    after = _state(daily)
    # one new message: an extracted preference and an episode, each embedded once
    assert after[0] == first[0] + 2 and after[1] == first[1] + 2 and after[3] == first[3] + 1
    assert after[2] > first[2]
    # the old embeddings kept their embedded_at: only the new text was embedded
    assert query(daily, "select count(*) from int_memory_embeddings where embedded_at = ?", [first[2]])[0][0] == first[1]
    sources = query(daily, "select kind, source_message_ids from long_term_memory where content like '%English%'"
                           " order by kind")
    assert sources == [("episode", ["demo-s9-1"]), ("preference", ["demo-s9-1"])]


BATCHES = [
    [("s1", "2026-11-03 09:00:00", "I prefer tables."), ("s1", "2026-11-03 09:05:00", "I live in Lyon."),
     ("s1", "2026-11-03 09:06:00", "I prefer dark mode.")],
    # a near-duplicate wording (joins the earlier memory), a repeat (the same candidate again),
    # a slot update (Paris supersedes Lyon), a new user
    [("s2", "2026-11-06 09:00:00", "I prefer tables,"), ("s2", "2026-11-06 09:01:00", "I prefer dark mode."),
     ("s2", "2026-11-06 09:05:00", "I moved to Paris."), ("s9", "2026-11-06 09:05:00", "I prefer green tea.")],
    # out of order: earlier than everything above (a new earliest candidate of existing memories:
    # the user is recomputed in full), and a statement the user makes again later
    [("s0", "2026-11-01 09:00:00", "I prefer tables!"), ("s3", "2026-11-09 09:05:00", "I moved to Paris."),
     ("s3", "2026-11-09 09:06:00", "I prefer tables , ")],
]
MEMORY_STATE = ("select memory_id, user_id, kind, slot, content, created_at, last_mentioned_at, mention_count,"
                " source_message_ids, mentioned_at, merged_candidates, valid_to, list_sort(candidate_ids),"
                " embedding = embedding from int_memories_consolidated order by memory_id")


def _land(store: MemoryStore, batch: list[tuple[str, str, str]], n: int) -> None:
    store.remember_many({"user_id": "ann" if sid != "s9" else "bob", "session_id": sid, "msg_seq": i, "role": "user",
                         "content": text, "ts": ts, "message_id": f"b{n}-{i}"} for i, (sid, ts, text) in enumerate(batch))


def test_incremental_consolidation_equals_one_full_build(tmp_path) -> None:
    """Builds after each batch (new candidates compared with the user's existing ones, a user
    recomputed when an earlier candidate arrives) end where one full build of everything ends."""
    step = MemoryStore(tmp_path / "step" / "store.duckdb")
    once = MemoryStore(tmp_path / "once" / "store.duckdb")
    for n, batch in enumerate(BATCHES):
        _land(step, batch, n)
        _land(once, batch, n)
        step.build(vars=AS_OF)
        if n == 0:
            first = query(step, MEMORY_STATE)
    once.build(vars=AS_OF)
    got, want = query(step, MEMORY_STATE), query(once, MEMORY_STATE)
    assert got == want
    assert got != first and any(r[10] > 1 for r in got), "no near-duplicate was merged"
    assert any(r[11] is not None for r in got), "no slot supersession"
    for sql in (  # and everything downstream of it that is incremental too
        "select memory_id, user_id, kind, content, strength, access_count, valid_to, source_message_ids, session_ids,"
        " agent_ids, is_question from long_term_memory order by memory_id",
        "select memory_id, session_ids, agent_ids from int_memory_provenance order by memory_id",
        "select term_entry_id, user_id, tf, doc_len from memory_term_index order by term_entry_id",
        "select term_stat_id, df, n_docs, avg_doc_len from memory_term_stats order by term_stat_id",
    ):
        assert query(step, sql) == query(once, sql), sql
    # the full refresh of the incremental store gives the same again, published as a base
    full = step.build(vars=AS_OF, full_refresh=True)
    assert query(step, MEMORY_STATE) == want
    assert "serving snapshot kind: base (full refresh)" in re.sub(r"\x1b\[[0-9;]*m", "", full.output)
