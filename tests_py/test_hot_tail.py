"""The hot tail (issue 17, docs/serving.md "Hot tail"): a remembered message is recalled before any
build, through the library, the CLI, HTTP and MCP, also when another process wrote it; kill -9
of the server keeps it; forget removes it from the tail; the next build folds it in with the same
memory_id and score, never twice. Real stores, real dbt builds, the real embedding model, the
real server and CLI processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from recall_shim import MemoryStore
from tests_py.conftest import RunningServer, copy_store, query
from tests_py.test_mcp import _session_calls

EXE = str(Path(sys.executable).with_name("agent-memory"))
ENV = {**os.environ, "OMP_WAIT_POLICY": "passive"}
# statements no extraction rule matches (only their episode is a memory, before and after a build)
BOARD_GAME = "Carcassonne is the board game our family plays every Friday evening."
VIOLIN = "Our neighbour Tomas repairs old violins in his garage workshop."
CANOE = "The red canoe stays in the boathouse behind the lake cabin."
GARDEN = "Grandmother planted seven apple trees along the northern garden wall."
BASE = [
    ("alice", "I prefer short answers with tables."),
    ("alice", "I live in Lisbon."),
    ("alice", "We went hiking in the Alps last summer and loved the cold mountain lakes."),
    ("bob", "I work as a nurse at the city hospital."),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small store built once; tests work on copies."""
    store = MemoryStore(tmp_path_factory.mktemp("tail-template") / "store.duckdb")
    store.remember_many([{"user_id": u, "content": c, "session_id": "s0", "msg_seq": i, "role": "user",
                          "ts": "2026-11-30 09:00:00", "message_id": f"base-{i}"} for i, (u, c) in enumerate(BASE)])
    store.build()
    store.close()
    return store.paths.db


@pytest.fixture()
def db(template: Path, tmp_path: Path) -> Path:
    return copy_store(template, tmp_path / "store")


def _ids(results: list[Any]) -> list[str]:
    return [r.memory_id if hasattr(r, "memory_id") else r["memory_id"] for r in results]


def _sources(results: list[Any]) -> set[str]:
    out: set[str] = set()
    for r in results:
        out.update(r.source_message_ids if hasattr(r, "source_message_ids") else r["source_message_ids"])
    return out


def _cli(*args: str) -> str:
    proc = subprocess.run([EXE, *args], capture_output=True, text=True, env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_extraction_compiles_each_rule_pattern_once(template: Path) -> None:
    """The published tail extraction and the build's int_memories_extracted hold the extraction
    rules' patterns as constants (macros/rule_patterns.sql), not a join on the pattern column,
    which DuckDB compiled again for every (rule, clause) pair."""
    import csv

    import duckdb

    paths = MemoryStore(template, hot_tail=False).paths
    snapshot = json.loads((paths.serving / "published.json").read_text())["snapshot"]
    con = duckdb.connect(str(paths.serving / snapshot), read_only=True)
    tail_sql = con.execute("select sql_text from recall_queries where query_name = 'tail_extractions'").fetchone()[0]
    con.close()
    model_sql = next(paths.dbt_dir.glob("target/run/**/int_memories_extracted.sql")).read_text()
    with open(Path(__file__).parents[1] / "seeds" / "extraction_rules.csv", encoding="utf-8") as fh:
        rules = list(csv.DictReader(fh))
    for sql in (tail_sql, model_sql):
        assert "regexp_full_match(c.clause, r.pattern)" not in sql
        for rule in rules[:5]:
            assert "'" + rule["pattern"].replace("'", "''") + "'" in sql


def test_library_recalls_a_remembered_message_before_any_build(db: Path) -> None:
    store = MemoryStore(db)
    store.recall("which board game", user_id="alice", min_sim=0)
    snapshot = store.snapshot_path
    mid = store.remember("alice", BOARD_GAME, session_id="s1", msg_seq=1)
    hits = store.recall("Which board game does the family play on Fridays?", user_id="alice", min_sim=0, top_k=3)
    assert hits[0].source_message_ids == [mid] and hits[0].kind == "episode" and hits[0].content == BOARD_GAME
    assert store.snapshot_path == snapshot  # no build ran
    # a store opened afterwards (a fresh process: the CLI) builds its tail from the landed files
    other = MemoryStore(db)
    assert mid in _sources(other.recall("board game on Fridays", user_id="alice", min_sim=0, top_k=3))
    # scoped per user: bob's recall never sees alice's tail
    assert mid not in _sources(other.recall("board game on Fridays", user_id="bob", min_sim=0, top_k=10))
    # the session scope reads the tail's provenance
    assert mid in _sources(store.recall("board game", user_id="alice", min_sim=0, session_id="s1"))
    assert store.recall("board game", user_id="alice", min_sim=0, session_id="s0", top_k=10)
    assert mid not in _sources(store.recall("board game", user_id="alice", min_sim=0, session_id="s0", top_k=10))
    # off by request: the snapshot alone answers
    assert mid not in _sources(MemoryStore(db, hot_tail=False).recall("board game on Fridays", user_id="alice",
                                                                       min_sim=0, top_k=10))


def test_cli_writer_and_cli_reader_in_fresh_processes(db: Path) -> None:
    mid = _cli("remember", "--db", str(db), "--user", "carol", "--message-id", "carol-1", VIOLIN).strip()
    assert mid == "carol-1"
    out = json.loads(_cli("recall", "--db", str(db), "--user", "carol", "--min-sim", "0", "--json",
                          "who repairs violins?"))
    assert out[0]["source_message_ids"] == ["carol-1"] and out[0]["content"] == VIOLIN


def test_forget_removes_tail_memories_and_the_build_folds_the_rest_in(db: Path) -> None:
    # one store, one build: the tail memories forgotten before it (dora's, and one of alice's own by
    # id) stay gone after it, and alice's other tail memory is folded in with the same id and score,
    # lexical score included: the forget recomputes alice's BM25 statistics in the purged snapshot
    # (recall_shim/forget/serving.py; before, they were left out until the build: 0.58 vs 2.56)
    store = MemoryStore(db)
    garden = store.remember("dora", GARDEN, session_id="s1", msg_seq=1)
    keep = store.remember("alice", BOARD_GAME, session_id="s1", msg_seq=2)
    hit = store.recall("apple trees in the garden", user_id="dora", min_sim=0)
    assert _sources(hit) == {garden}
    # a second reader (another process) holds the tail too
    other = MemoryStore(db)
    assert _sources(other.recall("apple trees in the garden", user_id="dora", min_sim=0)) == {garden}
    store.forget(user_id="dora", actor="test")
    assert store.recall("apple trees in the garden", user_id="dora", min_sim=0) == []
    assert other.recall("apple trees in the garden", user_id="dora", min_sim=0) == []
    assert keep in _sources(other.recall("board game", user_id="alice", min_sim=0))
    # forgetting one tail memory by id (alice has snapshot memories too)
    memory_id = store.recall("board game", user_id="alice", min_sim=0)[0].memory_id
    store.forget(memory_id=memory_id, actor="test")
    assert memory_id not in _ids(store.recall("board game", user_id="alice", min_sim=0, top_k=20))
    assert memory_id not in _ids(other.recall("board game", user_id="alice", min_sim=0, top_k=20))

    mid = store.remember("alice", CANOE, session_id="s2", msg_seq=1)
    questions = ["Where is the red canoe kept?", "what do I like about mountains", "Where do I live?"]
    before = store.recall_many(questions, user_id="alice", min_sim=0, top_k=10)
    assert mid in _sources(before[0][:1])
    snapshot = store.snapshot_path
    store.build()
    after = store.recall_many(questions, user_id="alice", min_sim=0, top_k=10)
    assert store.snapshot_path != snapshot
    # the build made only the episode of this message (no rule matches it), so the memories are the same
    assert query(MemoryStore(db), "select count(*) from long_term_memory where list_contains(source_message_ids, ?)",
                 [mid]) == [(1,)]
    for b, a in zip(before, after):
        assert len(set(_ids(a))) == len(a)  # never the same memory twice
        assert _ids(b) == _ids(a)  # same memories, same ids, same order
        for x, y in zip(b, a):
            # same score: the tail was scored with the snapshot's statement over snapshot + tail
            # (min-max of cosine and BM25 statistics over the same memories); what differs is the
            # decay between the recall and the build's as_of (seconds of a 0.95/day decay)
            assert y.score == pytest.approx(x.score, rel=1e-4, abs=1e-6)
            assert y.similarity == pytest.approx(x.similarity, abs=1e-5)
            assert y.lexical_score == pytest.approx(x.lexical_score, rel=1e-9, abs=1e-9)
    # the build brought back neither the forgotten memory nor the forgotten user
    assert memory_id not in _ids(store.recall("board game", user_id="alice", min_sim=0, top_k=20))
    assert store.recall("apple trees in the garden", user_id="dora", min_sim=0) == []


def test_the_tail_makes_the_builds_third_person_memories(db: Path) -> None:
    # the tail runs the published extraction, the content rewrites included: the same memories
    # (ids and wording) before the build as after it
    store = MemoryStore(db)
    store.remember("erin", "I lost my job at the plant, and my colleague Rob invited me to a yoga class",
                   session_id="s9", msg_seq=1)
    before = {(r.memory_id, r.content) for r in store.recall("job plant yoga Rob", user_id="erin", top_k=10, min_sim=-1)}
    assert {"User lost their job at the plant", "User's colleague Rob invited them to a yoga class"} <= {
        c for _, c in before}
    store.build()
    after = {(r.memory_id, r.content) for r in store.recall("job plant yoga Rob", user_id="erin", top_k=10, min_sim=-1)}
    assert after == before


def test_the_index_path_over_the_tail_equals_the_compiled_statement(db: Path, tmp_path: Path) -> None:
    # a tail user is scored from the index plus the tail's arrays with the published expressions;
    # the spec is the compiled statement over snapshot + tail (what a store without an index runs)
    writer = MemoryStore(db)
    writer.remember_many([{"user_id": "alice", "session_id": "s3", "msg_seq": i, "role": "user", "content": c}
                          for i, c in enumerate([CANOE, BOARD_GAME, "I prefer answers with tables and short lists.",
                                                 "我喜欢简洁的输出，最好用表格。", "Hiking in the Alps: the lakes were cold."])])
    writer.remember("bob", VIOLIN, session_id="s3", msg_seq=9)
    writer.remember("alice", "I moved to Porto last month.", session_id="s3", msg_seq=10)
    spec_db = copy_store(db, tmp_path / "spec")
    spec = MemoryStore(spec_db)
    for index in spec.paths.serving.glob("*.index"):
        shutil.rmtree(index)
    indexed = MemoryStore(db)
    questions = ["Where is the red canoe kept?", "how should answers be formatted? tables", "喜欢什么输出方式",
                 "cold lakes in the mountains", "board game", "where does the user live now? Porto"]
    for user, kinds, top_k, min_sim in [("alice", None, 10, 0.0), ("alice", ["episode"], 3, 0.0),
                                       ("alice", ["preference", "fact"], 5, 0.0), ("alice", None, 4, 0.82),
                                       ("bob", None, 5, 0.0)]:
        got = indexed.recall_many(questions, user_id=user, kinds=kinds, top_k=top_k, min_sim=min_sim)
        want = spec.recall_many(questions, user_id=user, kinds=kinds, top_k=top_k, min_sim=min_sim)
        assert indexed._reader.indexed and not spec._reader.indexed
        for g, w in zip(got, want):
            assert _ids(g) == _ids(w), (user, kinds, [x.content for x in g], [x.content for x in w])
            for x, y in zip(g, w):
                # float32 cosines in SQL, then min-max over few candidates (kinds=['episode']: a
                # narrow cosine range) amplifies their rounding: 1.2e-4 relative measured
                assert x.score == pytest.approx(y.score, rel=3e-4, abs=1e-5), (user, kinds, x, y)
                assert x.similarity == pytest.approx(y.similarity, abs=1e-5)
                assert x.lexical_score == pytest.approx(y.lexical_score, rel=1e-9, abs=1e-9)
                assert (x.content, x.source_message_ids, x.kind) == (y.content, y.source_message_ids, y.kind)
                assert (x.said_at, x.happened_on, x.happened_grain) == (y.said_at, y.happened_on, y.happened_grain)
    assert any(m.source_message_ids and m.memory_id for g in got for m in g)
    # a tail memory carries its dates on both paths: said now, happened "last month"
    porto = [m for g in indexed.recall_many(questions, user_id="alice", top_k=10, min_sim=0.0) for m in g
             if m.content == "User lives in Porto"]
    assert porto and porto[0].said_at is not None and porto[0].happened_grain == "month"
    assert porto[0].happened_on == (porto[0].said_at.date().replace(day=1) - timedelta(days=1)).replace(day=1)


def test_mcp_remember_then_recall(db: Path) -> None:
    # the server's tail worker picks the message up outside the recall path: poll, no timing assertion
    def found(result: Any) -> bool:
        return not result.is_error and any(result.structured_content["results"])

    _, (remembered, recalled) = anyio.run(_session_calls, db, [
        ("remember", {"user_id": "erin", "content": CANOE, "session_id": "m1"}),
        ("recall", {"user_id": "erin", "query": "where is the canoe", "min_sim": 0, "record_access": False}),
    ], found)
    assert not recalled.is_error, recalled.content
    mid = remembered.structured_content["message_id"]
    assert recalled.structured_content["results"][0]["source_message_ids"] == [mid]


def _poll(server: RunningServer, body: dict[str, Any], until: Any, seconds: float = 60) -> Any:
    """POST ``body`` to /recall until ``until(response)`` holds or a generous deadline passes;
    every answer meanwhile must be a 200 (the server keeps answering while its worker works)."""
    deadline = time.monotonic() + seconds
    while True:
        r = server.post("/recall", body)
        assert r.status_code == 200, r.text
        if until(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def _top_sources(r: Any) -> list[str] | None:
    results = r.json()["results"]
    return results[0]["source_message_ids"] if results else None


def test_http_server_serves_its_own_and_other_processes_writes_and_survives_kill_9(db: Path, tmp_path: Path) -> None:
    server_db = db
    server = RunningServer(server_db, tmp_path / "server.log")
    try:
        r = server.post("/remember", {"user_id": "frank", "content": VIOLIN, "session_id": "h1"})
        assert r.status_code == 202, r.text
        mid = r.json()["message_id"]
        body = {"user_id": "frank", "query": "who repairs violins", "min_sim": 0, "record_access": False}
        r = _poll(server, body, lambda r: _top_sources(r) == [mid])
        assert _top_sources(r) == [mid], r.text
        # a CLI writer (another process) lands a message: the running server's worker picks it up
        _cli("remember", "--db", str(server_db), "--user", "frank", "--message-id", "frank-cli", GARDEN)
        body = {**body, "query": "apple trees along the wall"}
        r = _poll(server, body, lambda r: _top_sources(r) == ["frank-cli"])
        assert _top_sources(r) == ["frank-cli"], r.text
        server.proc.kill()  # kill -9
        server.proc.wait()
    finally:
        server.stop()
    # a restarted server rebuilds its tail from what landed since the newest snapshot
    server = RunningServer(server_db, tmp_path / "server2.log")
    try:
        body = {"user_id": "frank", "queries": ["who repairs violins", "apple trees along the wall"], "min_sim": 0,
                "record_access": False}
        deadline = time.monotonic() + 60
        while True:
            r = server.post("/recall-many", body)
            assert r.status_code == 200, r.text
            tops = [g[0]["source_message_ids"] if g else None for g in r.json()["results"]]
            if tops == [[mid], ["frank-cli"]] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert tops == [[mid], ["frank-cli"]]
    finally:
        server.stop()


def test_the_server_answers_while_its_worker_makes_a_batch(db: Path, tmp_path: Path) -> None:
    # 120 messages in one request: the worker extracts them with one statement run and embeds them
    # in one call, outside the recall lane; recalls keep being answered meanwhile, and then every
    # message of the batch is recallable
    server = RunningServer(db, tmp_path / "server.log")
    try:
        rows = [{"user_id": "gina", "session_id": "b1", "msg_seq": i, "role": "user", "message_id": f"gina-{i}",
                 "ts": "2026-12-01 10:00:00",
                 "content": f"Batch note {i}: the parcel number {1000 + i} went to locker {i % 17}."}
                for i in range(120)]
        r = server.post("/ingest", {"rows": rows})
        assert r.status_code == 202, r.text
        # the recall right after the acknowledgement is answered (it never waits for the worker)
        r = server.post("/recall", {"user_id": "alice", "query": "what do I like about mountains", "min_sim": 0,
                                    "record_access": False})
        assert r.status_code == 200 and r.json()["results"], r.text
        r = _poll(server, {"user_id": "gina", "query": "parcel number 1119", "min_sim": 0, "top_k": 3,
                           "record_access": False}, lambda r: "gina-119" in _sources(r.json()["results"]))
        assert "gina-119" in _sources(r.json()["results"]), r.text
        r = server.post("/recall-many", {"user_id": "gina", "queries": [f"parcel number {1000 + i}" for i in (0, 57)],
                                         "min_sim": 0, "top_k": 3, "record_access": False})
        assert [f"gina-{i}" in _sources(g) for i, g in zip((0, 57), r.json()["results"])] == [True, True], r.text
    finally:
        server.stop()


def test_a_user_with_an_ivf_index_sees_the_tail(db: Path) -> None:
    # a user served by a per-user IVF (more than recall_index_min_rows memories; 20,000 shipped)
    # with tail memories is scanned exactly beside the tail (the tail moves every memory's min-max
    # and BM25 statistics), with the same score the next build serves
    store = MemoryStore(db)
    # alice gets enough memories for an IVF (faiss trains at least 16 points); bob stays small
    notes = ["My brother Felix studies marine biology in Kiel.", "The bakery on Rua Augusta sells custard tarts.",
             "I broke my left wrist skiing when I was twelve.", "Our landlord raised the rent by eighty euros.",
             "The printer at the office jams on double-sided pages.", "I keep my passport in the blue drawer.",
             "My grandmother taught me to knit scarves.", "The train to Porto leaves at seven fifteen.",
             "I donated blood at the clinic last Tuesday.", "Our dentist moved her practice to Belém.",
             "The cat knocked a vase off the windowsill.", "I learned to solve the Rubik's cube in a weekend.",
             "The football club meets behind the old church.", "My laptop battery lasts barely two hours now.",
             "I planted tomatoes and basil on the balcony.", "The museum has a new exhibit about tiles.",
             "Our wifi password is taped under the router.", "I lost my umbrella on the tram yesterday.",
             "The neighbours host a barbecue every June.", "I am reading a novel about lighthouse keepers.",
             "My car failed its inspection because of the brakes.", "The violin teacher charges thirty euros an hour."]
    store.remember_many([{"user_id": "alice", "content": c, "session_id": "s0", "msg_seq": 100 + i, "role": "user",
                          "ts": "2026-11-30 10:00:00"} for i, c in enumerate(notes)])
    store.build(vars={"recall_index_min_rows": 3})
    assert store._reader.ivf_user("alice") and not store._reader.ivf_user("bob")
    store.remember("alice", BOARD_GAME, session_id="s1", msg_seq=1)
    mid = store.remember("bob", VIOLIN, session_id="s1", msg_seq=1)
    question = "Which board game does the family play on Fridays?"
    before = store.recall(question, user_id="alice", min_sim=0, top_k=5)
    assert before[0].content == BOARD_GAME
    bob = store.recall("Who repairs violins?", user_id="bob", min_sim=0, top_k=3)
    assert bob[0].source_message_ids == [mid]
    store.build(vars={"recall_index_min_rows": 3})
    after = store.recall(question, user_id="alice", min_sim=0, top_k=5)
    assert _ids(after) == _ids(before)
    for x, y in zip(before, after):
        assert y.score == pytest.approx(x.score, rel=1e-4, abs=1e-6)
    store.close()
