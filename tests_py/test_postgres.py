"""The same dbt project on PostgreSQL + pgvector (docs/scaling_out.md): a real server from the
pgserver wheel, concurrent writers, the two-step build with Python embedding, recall through the
compiled statement, decay as_of, access reinforcement, and parity with the DuckDB target on the
same input. Skipped with the reason when PostgreSQL cannot be started, unless
AGENT_MEMORY_REQUIRE_POSTGRES=1 (scripts/test.sh sets it): then that is a failure."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Iterator

import pytest

from recall_shim import (BuildFailed, DimensionMismatch, InvalidQuery, LocalPostgres, MemoryStore,
                         PgMemoryStore)

from recall_shim.common.paths import project_dir

from .conftest import DEMO_LOG, query, start_postgres

QUERIES = ["how should answers be formatted?", "where does the user live?", "what editor theme does the user like?",
           # a question that asks for a slot and for the current state (recall_factor's slot_asked, recency)
           "where do I live now?"]


def writer_rows(writer: int) -> list[dict[str, Any]]:
    """Five messages of one writer's user: rule matches, a slot change, an episode, a reject."""
    user = f"w{writer}"
    texts = ["I prefer dark mode in my editor", "I live in Lyon", "We talked about the quarterly sales report",
             "I live in Paris", "   "]
    return [{"user_id": user, "session_id": f"s{writer}", "msg_seq": i, "role": "user", "content": t,
             "ts": f"2026-11-0{i + 1} 10:00:00", "message_id": f"{user}-{i}"} for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def pg_conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    server = LocalPostgres(tmp_path_factory.mktemp("pg") / "data")
    conn = start_postgres(server)
    yield conn
    server.stop()


WRITER = """
import json, sys
from recall_shim import PgConnection, PgMemoryStore
conn = PgConnection(**json.loads(sys.argv[1]))
store = PgMemoryStore(conn, work_dir=sys.argv[2])
for row in json.loads(sys.argv[3]):  # one transaction per row: many small concurrent writes
    store.remember_many([row])
print("acknowledged", flush=True)
"""


@pytest.fixture(scope="module")
def pg_store(pg_conn: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Demo log landed; four writer processes write while the first build runs; built again (the
    second build, incremental, loads what the first one's snapshot did not see)."""
    work = tmp_path_factory.mktemp("pg_work")
    store = PgMemoryStore(pg_conn, work_dir=work)
    assert store.ingest(DEMO_LOG).rows == 10
    assert store.ingest(DEMO_LOG).skipped  # the same bytes twice: skipped
    conn_json = json.dumps(dataclasses.asdict(pg_conn))
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, conn_json, str(work), json.dumps(writer_rows(w))],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(4)]
    store.build()  # concurrently with the writers: nobody waits, nothing is lost (checked after the next build)
    outputs = [p.communicate(timeout=300) for p in writers]
    assert [p.returncode for p in writers] == [0] * 4, outputs
    assert all("acknowledged" in out for out, _ in outputs)
    store.build()
    return store


@pytest.fixture(scope="module")
def duck_store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    """The same input on the DuckDB target."""
    store = MemoryStore(tmp_path_factory.mktemp("duck") / "store.duckdb")
    store.ingest(DEMO_LOG)
    for w in range(4):
        store.remember_many(writer_rows(w))
    store.build()
    return store


def pg_rows(conn: Any, sql: str, params: list | None = None) -> list[tuple]:
    with conn.connect() as con:
        return con.execute(sql, params or []).fetchall()


def test_concurrent_writers_all_land_and_load(pg_store: Any) -> None:
    s = pg_store.conn.schema
    assert pg_rows(pg_store.conn, f"select count(*) from {s}.session_log_landing")[0][0] == 10 + 4 * 5
    assert pg_rows(pg_store.conn, f"select count(*) from {s}.session_log")[0][0] == 30
    rejects = pg_rows(pg_store.conn, f"select reject_reason, count(*) from {s}.session_log_rejects group by 1")
    assert rejects == [("empty_content", 4)]


def test_messages_and_memories_match_duckdb(pg_store: Any, duck_store: MemoryStore) -> None:
    s = pg_store.conn.schema
    pg_msgs = sorted(pg_rows(pg_store.conn, f"select message_id, role, content, message_at from {s}.session_messages"))
    duck_msgs = sorted(query(duck_store, "select message_id, role, content, message_at from session_messages"))
    assert pg_msgs == duck_msgs and len(pg_msgs) == 26
    sql = ("select memory_id, user_id, kind, content, valid_to is null, mention_count, source_message_ids"
           " from {}long_term_memory order by memory_id")
    pg_mem = [r[:6] + (list(r[6]),) for r in pg_rows(pg_store.conn, sql.format(s + "."))]
    duck_mem = [r[:6] + (list(r[6]),) for r in query(duck_store, sql.format(""))]
    assert pg_mem == duck_mem
    # English rules ((?i) patterns) fired, and the slot change superseded Lyon for every writer
    by_content: dict[tuple[str, bool], list[str]] = {}
    for r in pg_mem:
        if r[1].startswith("w"):
            by_content.setdefault((r[3], r[4]), []).append(r[1])
    assert sorted(by_content[("User prefers dark mode in their editor", True)]) == ["w0", "w1", "w2", "w3"]
    assert sorted(by_content[("User lives in Lyon", False)]) == ["w0", "w1", "w2", "w3"]
    assert sorted(by_content[("User lives in Paris", True)]) == ["w0", "w1", "w2", "w3"]


def test_term_index_matches_duckdb(pg_store: Any, duck_store: MemoryStore) -> None:
    s = pg_store.conn.schema
    pg_terms = sorted(pg_rows(pg_store.conn, f"select memory_id, term, tf, doc_len from {s}.memory_term_index"))
    duck_terms = sorted(query(duck_store, "select memory_id, term, tf, doc_len from memory_term_index"))
    assert pg_terms == duck_terms and pg_terms


def test_recall_matches_duckdb(pg_store: Any, duck_store: MemoryStore) -> None:
    for user in ("demo", "w1"):
        pg = pg_store.recall_many(QUERIES, user_id=user, top_k=5, min_sim=0.0, record_access=False)
        duck = duck_store.recall_many(QUERIES, user_id=user, top_k=5, min_sim=0.0, record_access=False)
        assert [len(g) for g in pg] == [len(g) for g in duck] and any(pg)
        for pg_group, duck_group in zip(pg, duck):
            # strength differs by the seconds between the two builds; ids, order and cosine agree
            assert [m.memory_id for m in pg_group] == [m.memory_id for m in duck_group]
            for a, b in zip(pg_group, duck_group):
                assert math.isclose(a.similarity, b.similarity, abs_tol=1e-5)
                assert math.isclose(a.lexical_score, b.lexical_score, rel_tol=1e-6, abs_tol=1e-9)
    now = pg_store.recall("where do I live now?", user_id="w1", top_k=1, min_sim=0.0, record_access=False)
    assert now[0].content == "User lives in Paris"  # the current city, on PostgreSQL too


def test_recall_errors_and_scoping(pg_store: Any) -> None:
    assert pg_store.recall("where does the user live?", user_id="nobody") == []
    with pytest.raises(InvalidQuery):
        pg_store.recall("anything", user_id=" ")
    with pytest.raises(DimensionMismatch):
        pg_store.recall([0.1, 0.2], user_id="demo")
    lyon = pg_store.recall("where does the user live?", user_id="w2", top_k=10, min_sim=0.0, kinds=["fact"],
                           record_access=False)
    assert lyon and all(m.kind == "fact" for m in lyon)
    assert "User lives in Lyon" not in [m.content for m in lyon]  # superseded by Paris
    block = pg_store.prompt(["where does the user live?"], user_id="w2", min_sim=0.0, record_access=False)
    assert "User lives in Paris" in block


def hnsw_indexes(conn: Any) -> list[tuple[str, int, str]]:
    """(name, oid, indexdef) of every hnsw index on long_term_memory, by name."""
    return pg_rows(conn, "select i.relname, i.oid::bigint, pg_get_indexdef(i.oid) from pg_index as x"
                         " join pg_class as i on i.oid = x.indexrelid join pg_am as a on a.oid = i.relam"
                         " where a.amname = 'hnsw' and x.indrelid = to_regclass(%s) order by 1",
                   [f'"{conn.schema}"."long_term_memory"'])


def test_long_term_memory_has_an_hnsw_index(pg_store: Any) -> None:
    """One hnsw (cosine) index, built by the model's post-hook with the shipped vars (m 16, ef_construction 96)."""
    (name, _, indexdef), = hnsw_indexes(pg_store.conn)
    assert name == "long_term_memory_embedding_hnsw_m16_ef96"
    assert "vector_cosine_ops" in indexdef and "WITH (m='16', ef_construction='96')" in indexdef, indexdef


def test_agent_and_session_scopes(pg_store: Any) -> None:
    q = "where does the user live?"
    everything = pg_store.recall(q, user_id="w1", top_k=10, min_sim=0.0, record_access=False)
    in_session = pg_store.recall(q, user_id="w1", top_k=10, min_sim=0.0, record_access=False, session_id="s1")
    assert everything and [m.memory_id for m in in_session] == [m.memory_id for m in everything]
    assert pg_store.recall(q, user_id="w1", top_k=10, min_sim=0.0, record_access=False, session_id="s2") == []
    assert pg_store.recall(q, user_id="w1", top_k=10, min_sim=0.0, record_access=False, agent_id="nobody") == []
    with pytest.raises(InvalidQuery):
        pg_store.recall(q, user_id="w1", session_id=" s1")


def tables_with(conn: Any, column: str) -> list[str]:
    return [r[0] for r in pg_rows(conn, "select table_name from information_schema.columns where table_schema = %s"
                                        " and column_name = %s", [conn.schema, column])
            if r[0] not in ("forget_landing", "stg_forget_requests")]


def test_forget_then_rebuild_as_of_with_access_reinforcement(pg_store: Any) -> None:
    """Runs last but one (module order): a recall records an access; forget one memory, then a
    whole user; one rebuild with a fixed as_of keeps both gone, loads the access (reinforcement)
    and decays every strength as of as_of."""
    conn, s, q = pg_store.conn, pg_store.conn.schema, "where does the user live?"
    hits = pg_store.recall("how should answers be formatted?", user_id="demo", top_k=1, min_sim=0.0, record_access=True)
    assert len(hits) == 1
    accessed = hits[0].memory_id
    paris = pg_rows(conn, f"select memory_id from {s}.long_term_memory where user_id = 'w3'"
                          " and content = 'User lives in Paris'")[0][0]
    filenode = f"select pg_relation_filenode('{s}.session_log_landing')"
    before = pg_rows(conn, filenode)[0][0]
    rep = pg_store.forget(memory_id=paris, actor="test")
    # plain VACUUM, not VACUUM FULL: the table was vacuumed in place, never rewritten under an exclusive lock
    assert pg_rows(conn, filenode)[0][0] == before
    assert pg_rows(conn, "select last_vacuum is not null from pg_stat_user_tables where schemaname = %s"
                         " and relname = 'session_log_landing'", [s])[0][0] is True
    assert rep.scope == "memory" and rep.user_id == "w3" and rep.found and rep.messages == 1
    # the owner's BM25 statistics are recomputed at once over the term rows of its remaining
    # memories (the forget deletes the owner's rows of this per-user aggregate)
    w3_stats = pg_rows(conn, f"select term, df, n_docs from {s}.memory_term_stats where user_id = 'w3' order by term")
    w3_index = pg_rows(conn, f"select term, count(*), (select count(distinct memory_id) from {s}.memory_term_index"
                             f" where user_id = 'w3') from {s}.memory_term_index where user_id = 'w3' group by term order by term")
    assert w3_stats and w3_stats == w3_index and "paris" not in {r[0] for r in w3_stats}
    nothing = pg_store.forget(memory_id="mem2_no_such_memory", actor="test")  # counts what was stored: none
    assert (nothing.found, nothing.memories, nothing.messages) == (False, 0, 0)
    user = pg_store.forget(user_id="w0", actor="test")
    assert user.scope == "user" and user.found and user.memories > 0
    assert user.removed["warehouse:session_log_landing"] == 5

    def gone() -> None:
        for t in tables_with(conn, "memory_id"):
            assert pg_rows(conn, f'select count(*) from {s}."{t}" where memory_id = %s', [paris])[0][0] == 0, t
        for t in tables_with(conn, "user_id"):
            assert pg_rows(conn, f'select count(*) from {s}."{t}" where user_id = %s', ["w0"])[0][0] == 0, t
        assert pg_rows(conn, f"select count(*) from {s}.session_log_landing where message_id = 'w3-3'")[0][0] == 0

    gone()
    as_of = datetime(2027, 1, 1)
    pg_store.build(vars={"as_of": as_of.strftime("%Y-%m-%d %H:%M:%S")})
    gone()
    # the access was loaded once and reinforces its memory; every strength is decayed as of as_of
    assert pg_rows(conn, f"select count(*) from {s}.stg_recall_events where memory_id = %s", [accessed])[0][0] == 1
    rows = pg_rows(conn, f"select memory_id, created_at, mention_count, access_count, strength,"
                         f" strength_as_of from {s}.long_term_memory")
    assert rows and all(r[5] == as_of for r in rows)
    checked = 0
    for memory_id, created_at, mentions, accesses, strength, _ in rows:
        if memory_id == accessed:
            assert accesses == 1
        if mentions == 1 and accesses == 0:
            days = (as_of - created_at) / timedelta(days=1)
            assert math.isclose(strength, max(0.3, 0.95 ** days), rel_tol=1e-9)
            checked += 1
    assert checked > 5
    assert pg_store.recall(q, user_id="w0", min_sim=0.0) == []
    facts = [m.content for m in pg_store.recall(q, user_id="w3", top_k=10, min_sim=0.0, kinds=["fact"],
                                                 record_access=False)]
    assert "User lives in Paris" not in facts and "User lives in Lyon" in facts  # Lyon is current again
    assert [m.content for m in pg_store.recall(q, user_id="w2", kinds=["fact"], top_k=1, min_sim=0.0,
                                                record_access=False)] == ["User lives in Paris"]  # others untouched
    audit = [json.loads(r[0]) for r in pg_rows(conn, f"select record from {s}.forget_audit order by completed_at")]
    # every request is audited, the one that found nothing too (found false, nothing removed)
    assert [(a["scope"], a["actor"], a["found"]) for a in audit] == [
        ("memory", "test", True), ("memory", "test", False), ("user", "test", True)]
    assert not any("Paris" in json.dumps(a) or "Lyon" in json.dumps(a) for a in audit)  # ids and counts only


def test_plain_dbt_build_runs_every_data_test(pg_store: Any, tmp_path: Any) -> None:
    """Runs after the forget (module order): plain `dbt build --target postgres`, as an analyst or
    a scheduler would run it without the shim, passes, and runs the data tests the shim's two-step
    build leaves out (forgotten data stays forgotten, provenance ids exist)."""
    proj = project_dir()
    dbt = Path(sys.executable).with_name("dbt")
    env = {**os.environ, **pg_store.conn.dbt_env(), "DBT_TARGET_PATH": str(tmp_path / "target"),
           "DBT_LOG_PATH": str(tmp_path / "logs"), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    out = subprocess.run([str(dbt), "build", "--target", "postgres", "--project-dir", str(proj), "--profiles-dir",
                          str(proj)], cwd=proj, env=env, capture_output=True, text=True, timeout=1200)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    assert out.returncode == 0, text[-4000:]
    results = json.loads((tmp_path / "target" / "run_results.json").read_text())["results"]
    status = {r["unique_id"]: r["status"] for r in results}
    # exposures are documentation: `dbt build` lists them with status no-op
    assert status and all(v in ("success", "pass") or (uid.startswith("exposure.") and v == "no-op")
                          for uid, v in status.items()), text[-4000:]
    for name in ("test.agent_memory.forgotten_data_stays_forgotten", "test.agent_memory.list_values_exist_in_"):
        assert any(uid.startswith(name) for uid in status), f"{name} did not run"


def test_the_hnsw_graph_is_built_with_the_vars_and_rebuilt_once_when_they_change(pg_store: Any) -> None:
    """Runs last (module order): the post-hook (vector_index_hook) keeps one hnsw index whose name
    and storage parameters are the vars; the same vars keep it (same oid), new vars replace it
    once, a bad pair fails the build, a full refresh leaves one. Ends with the shipped vars."""
    conn, s = pg_store.conn, pg_store.conn.schema
    (name, oid, indexdef), = hnsw_indexes(conn)
    assert name == "long_term_memory_embedding_hnsw_m16_ef96"
    assert "m='16'" in indexdef and "ef_construction='96'" in indexdef, indexdef
    pg_store.build()
    assert hnsw_indexes(conn) == [(name, oid, indexdef)]  # not rebuilt
    pg_store.build(vars={"recall_index_hnsw_ef_construction": 128})
    (name2, oid2, indexdef2), = hnsw_indexes(conn)
    assert name2 == "long_term_memory_embedding_hnsw_m16_ef128" and oid2 != oid
    assert "m='16'" in indexdef2 and "ef_construction='128'" in indexdef2, indexdef2
    with pytest.raises(BuildFailed) as failed:
        pg_store.build(vars={"recall_index_hnsw_m": 16, "recall_index_hnsw_ef_construction": 20})
    assert "recall_index_hnsw_ef_construction (20) must be at least twice recall_index_hnsw_m (16)" in failed.value.output
    assert [r[:2] for r in hnsw_indexes(conn)] == [(name2, oid2)]  # the failed build changed nothing
    pg_store.build()  # the shipped vars again: rebuilt once
    (name3, oid3, indexdef3), = hnsw_indexes(conn)
    assert name3 == name and oid3 not in (oid, oid2) and "ef_construction='96'" in indexdef3
    # a full refresh: dbt renames the old table (its index keeps the name) before the hook runs
    pg_store.build(full_refresh=True)
    (name4, oid4, _), = hnsw_indexes(conn)
    assert name4 == name and oid4 != oid3
    every = pg_rows(conn, "select c.relname from pg_class as c join pg_namespace as n on n.oid = c.relnamespace"
                          " join pg_am as a on a.oid = c.relam where n.nspname = %s and a.amname = 'hnsw'", [s])
    assert every == [(name,)]  # and no other table of the schema keeps one
    assert pg_store.recall("where does the user live?", user_id="w2", min_sim=0.0, record_access=False)
