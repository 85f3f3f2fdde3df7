"""Incremental builds on PostgreSQL (docs/scaling_out.md, "Incremental builds"): a second build
loads only what is new, keeps every table and index (long_term_memory and its HNSW index keep
their OIDs: maintained by PostgreSQL, not rebuilt), and ends where a full refresh of the same
input ends. A real server from the pgserver wheel, real dbt builds, real embeddings."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from recall_shim import LocalPostgres, PgMemoryStore

from .conftest import DEMO_LOG, start_postgres

AS_OF = {"as_of": "2026-12-01 00:00:00"}  # strength as of a fixed time: builds are comparable

# the incrementally loaded models, and the columns that identify a row's content (not which run wrote it)
MODELS = {
    "session_messages": "message_id, user_id, session_id, role, content, message_at",
    "session_log_rejects": "landing_id, reject_reason, user_id, content",
    "int_messages_validated": "landing_id, message_id, user_id, reject_reason",
    "int_memory_candidates": "candidate_id, user_id, kind, slot, content, created_at, last_mentioned_at,"
                             " source_message_ids, mentioned_at",
    "int_memories_consolidated": "memory_id, user_id, kind, slot, content, valid_to, source_message_ids,"
                                 " mentioned_at, candidate_ids",
    "int_memory_provenance": "memory_id, session_ids, agent_ids",
    "memory_term_index": "memory_id, term, tf, doc_len",
    "memory_term_stats": "user_id, term, df, n_docs, avg_doc_len",
    "long_term_memory": "memory_id, user_id, kind, content, embedding::text, strength, access_count, mention_count,"
                        " source_message_ids, valid_from, valid_to, session_ids, agent_ids",
}


def rows(conn: Any, sql: str, params: list | None = None) -> list[tuple]:
    with conn.connect() as con:
        return con.execute(sql, params or []).fetchall()


def contents(conn: Any) -> dict[str, list[tuple]]:
    s = conn.schema
    return {m: sorted(rows(conn, f"select {cols} from {s}.{m}"), key=repr) for m, cols in MODELS.items()}


def oids(conn: Any) -> dict[str, int]:
    """OID of every incrementally loaded table and of every index on them."""
    out = {r[0]: r[1] for r in rows(conn, "select c.relname, c.oid::bigint from pg_class c join pg_namespace n"
                                          " on n.oid = c.relnamespace where n.nspname = %s and c.relname = any(%s)",
                                     [conn.schema, list(MODELS)])}
    for table, index, oid in rows(conn, "select t.relname, i.relname, i.oid::bigint from pg_index x"
                                        " join pg_class i on i.oid = x.indexrelid join pg_class t on t.oid = x.indrelid"
                                        " join pg_namespace n on n.oid = t.relnamespace"
                                        " where n.nspname = %s and t.relname = any(%s)", [conn.schema, list(MODELS)]):
        out[f"{table}/{index}"] = oid
    return out


def land(store: PgMemoryStore, user: str, texts: list[str], day: int) -> None:
    store.remember_many([{"user_id": user, "session_id": f"{user}-s{day}", "msg_seq": i, "role": "user",
                          "content": t, "ts": f"2026-11-{day:02d} 10:00:00", "message_id": f"{user}-{day}-{i}"}
                         for i, t in enumerate(texts)])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgMemoryStore]:
    server = LocalPostgres(tmp_path_factory.mktemp("pg_incr") / "data")
    conn = start_postgres(server)
    try:
        store = PgMemoryStore(conn, work_dir=tmp_path_factory.mktemp("pg_incr_work"))
        store.ingest(DEMO_LOG)
        land(store, "ana", ["I live in Lyon", "I prefer dark mode in my editor", "We discussed the sales report"], 1)
        land(store, "bo", ["I prefer short answers with tables", "   "], 1)
        store.build(vars=AS_OF)
        yield store
    finally:
        server.stop()


def test_builds_load_only_what_is_new_and_equal_a_full_refresh(store: PgMemoryStore) -> None:
    conn, s = store.conn, store.conn.schema
    first_oids, first = oids(conn), contents(conn)
    assert rows(conn, "select reloptions from pg_class where oid = %s", [first_oids["long_term_memory"]])[0][0] == [
        "fillfactor=50"]
    written = f"select memory_id, consolidated_at from {s}.long_term_memory order by memory_id"
    first_written = rows(conn, written)
    loaded = f"select landing_id, loaded_at from {s}.session_messages order by landing_id"
    first_loaded = rows(conn, loaded)

    # nothing new: no table or index is recreated, no row is rewritten, nothing changes
    store.build(vars=AS_OF)
    assert oids(conn) == first_oids
    assert contents(conn) == first
    assert rows(conn, written) == first_written and rows(conn, loaded) == first_loaded

    # a few new messages: a slot change for ana, a new user; old rows stay as they were loaded
    land(store, "ana", ["I live in Paris", "I prefer dark mode in my editor"], 2)
    land(store, "cy", ["I prefer green tea in the morning"], 2)
    store.build(vars=AS_OF)
    assert oids(conn) == first_oids  # long_term_memory and its HNSW index maintained, not rebuilt
    now_loaded = rows(conn, loaded)
    assert set(first_loaded) < set(now_loaded) and len(now_loaded) == len(first_loaded) + 3
    old_written = dict(first_written)
    now_written = dict(rows(conn, written))
    rewritten = {m for m, at in now_written.items() if m in old_written and at != old_written[m]}
    new = set(now_written) - set(old_written)
    users = dict(rows(conn, f"select memory_id, user_id from {s}.long_term_memory"))
    assert new and {users[m] for m in new} == {"ana", "cy"}
    assert {users[m] for m in rewritten} <= {"ana"}  # demo's and bo's memories were not written again
    lyon = rows(conn, f"select valid_to is not null from {s}.long_term_memory where user_id = 'ana'"
                      " and content = 'User lives in Lyon'")
    assert lyon == [(True,)]  # superseded by Paris in the incremental build
    # the HNSW index holds the new rows: an index scan finds a new memory by its own vector
    probe = sorted(new)[0]
    hnsw = [r[0] for r in rows(conn, "select indexname from pg_indexes where schemaname = %s"
                                     " and tablename = 'long_term_memory' and indexdef like '%%USING hnsw%%'", [s])]
    assert len(hnsw) == 1
    with conn.connect() as con:
        con.execute("set enable_seqscan = off")
        plan = "\n".join(r[0] for r in con.execute(
            f"explain select memory_id from {s}.long_term_memory order by embedding::vector(384) <=>"
            f" (select embedding from {s}.long_term_memory where memory_id = %s)::vector(384) limit 1",
            [probe]).fetchall())
        assert f'Index Scan using "{hnsw[0]}"' in plan or f"Index Scan using {hnsw[0]}" in plan, plan
        nearest = con.execute(
            f"select memory_id, embedding::vector(384) <=> (select embedding from {s}.long_term_memory"
            f" where memory_id = %s)::vector(384) from {s}.long_term_memory order by embedding::vector(384) <=>"
            f" (select embedding from {s}.long_term_memory where memory_id = %s)::vector(384) limit 1",
            [probe, probe]).fetchone()
    assert nearest[1] < 1e-6

    # the incremental result equals a full refresh of the same input
    incremental = contents(conn)
    store.build(vars=AS_OF, full_refresh=True)
    refreshed = contents(conn)
    for model in MODELS:
        assert incremental[model] == refreshed[model], model
    assert oids(conn)["long_term_memory"] != first_oids["long_term_memory"]  # a full refresh does recreate it
