"""forget(user) and forget(memory): gone from every file of the store, not resurrected by the next
build (not even --full-refresh), audited without content, safe while writers keep landing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from recall_shim import InvalidInput, MemoryStore
from recall_shim.common.locks import file_lock

from .conftest import DEMO_LOG, query

EXE = str(Path(sys.executable).with_name("agent-memory"))
TS = "2026-11-01 10:00:00"
RULE_KINDS = ["fact", "preference", "skill"]  # episodes (whole messages) are checked by content search


def store_files(store: MemoryStore) -> list[Path]:
    """Every file the store owns: the warehouse, its siblings, and all files in its folders."""
    stem = store.paths.stem
    out = []
    for p in stem.parent.iterdir():
        if p.name.startswith(stem.name):
            out.extend([p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()])
    return out


def encodings(marker: str) -> list[bytes]:
    # as stored by DuckDB (UTF-8) and as landed (ensure_ascii JSON escapes)
    return sorted({marker.encode("utf-8"), json.dumps(marker)[1:-1].encode("ascii")})


def files_containing(store: MemoryStore, marker: str) -> list[str]:
    needles = encodings(marker)
    return [str(f) for f in store_files(store) if any(n in f.read_bytes() for n in needles)]


def tables_containing(db: Path, marker: str) -> list[str]:
    """Every table of a DuckDB file whose rows, as text, contain marker."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        hits = []
        for schema, table in con.execute("select schema_name, table_name from duckdb_tables()").fetchall():
            n = con.execute(f'select count(*) from "{schema}"."{table}" as t where t::varchar like ?',
                            [f"%{marker}%"]).fetchone()[0]
            if n:
                hits.append(f"{db.name}:{table}")
        return hits
    finally:
        con.close()


def all_tables_containing(store: MemoryStore, marker: str) -> list[str]:
    dbs = [store.paths.db, *sorted(store.paths.serving.glob("snap-*.duckdb"))]
    return [hit for db in dbs for hit in tables_containing(db, marker)]


def owned(store: MemoryStore, content_like: str) -> list[tuple]:
    return query(store, "select memory_id, user_id from long_term_memory where content like ?", [f"%{content_like}%"])


def test_forget_user_and_memory_everywhere(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "store.duckdb")
    store.ingest(DEMO_LOG)
    rows = [
        # the user to forget: accepted messages (with agent/session provenance), a rejected one,
        # and a non-ASCII marker
        {"user_id": "gone", "session_id": "g1", "agent_id": "ag", "msg_seq": 1, "role": "user",
         "content": "I live in Zqgonecity. I prefer zqgonetea.", "ts": TS, "message_id": "g-1"},
        {"user_id": "gone", "session_id": "g1", "msg_seq": 2, "role": "robot",
         "content": "zqgonereject is rejected", "ts": TS, "message_id": "g-2"},
        {"user_id": "gone", "session_id": "g2", "msg_seq": 1, "role": "user",
         "content": "我住在秘密村庄", "ts": TS, "message_id": "g-3"},
        # a user one of whose memories is forgotten: its message also holds a second memory
        # (forgotten with it), another message holds a memory that stays
        {"user_id": "mem", "session_id": "m1", "msg_seq": 1, "role": "user",
         "content": "I prefer zqforgottentea. I have a zqcascadecat.", "ts": TS, "message_id": "m-1"},
        {"user_id": "mem", "session_id": "m1", "msg_seq": 2, "role": "user",
         "content": "I live in Zqkeptcity.", "ts": TS, "message_id": "m-2"},
        # a bystander with the same words as the forgotten user
        {"user_id": "keep", "session_id": "k1", "msg_seq": 1, "role": "user",
         "content": "I prefer zqgonetea. I live in Zqbystander.", "ts": TS, "message_id": "k-1"},
    ]
    store.remember_many(rows)
    store.build()
    for user in ("gone", "mem", "keep"):
        assert store.recall("what does the user like to drink?", user_id=user, min_sim=-1, top_k=20,
                            record_access=True)  # accesses
    store.build()  # loads the accesses: events, reinforced strength, strength snapshot rows

    forgotten = ["Zqgonecity", "zqgonereject", "秘密村庄", "zqforgottentea", "zqcascadecat"]
    kept = ["Zqkeptcity", "Zqbystander", "zqgonetea"]
    for marker in forgotten + kept:  # the byte search can see every marker before forgetting
        assert files_containing(store, marker), marker
    # including in the serving index's payload beside the snapshot, whose append-only heavy files
    # the second build's index shares with the first's (hard links)
    assert any(".index" in f for f in files_containing(store, "Zqgonecity"))
    assert max((p / "payload.bin").stat().st_nlink for p in store.paths.serving.glob("snap-*.index")) >= 2
    mem_id = owned(store, "zqforgottentea")[0][0]
    other_users_memory = owned(store, "Zqbystander")[0][0]
    with pytest.raises(InvalidInput, match="does not belong"):
        store.forget(memory_id=other_users_memory, user_id="mem")

    rep_user = store.forget(user_id="gone", actor="dpo@example.org")
    rep_mem = store.forget(memory_id=mem_id, user_id="mem", actor="dpo@example.org")
    assert rep_user.found and rep_user.scope == "user" and rep_user.memories >= 3
    assert rep_user.removed["landing:messages"] == 3 and rep_user.removed["landing:access"] >= 1
    assert rep_user.removed["warehouse:session_log_rejects"] == 1
    assert rep_user.removed["warehouse:memory_strength_history"] >= 1
    # the memory, the other memory of its one source message, and (if made) that message's episode
    assert rep_mem.found and rep_mem.memories >= 2 and rep_mem.messages == 1

    # the purged snapshot's index is a fresh heavy generation: no index file holds forgotten bytes
    assert [(p / "payload.bin").stat().st_nlink for p in store.paths.serving.glob("snap-*.index")] == [1]
    for marker in forgotten:
        assert [f for f in files_containing(store, marker) if ".index" in f] == [], marker

    # recall forgets at once (a purged snapshot is published), before any build
    assert store.recall("where does the user live?", user_id="gone", min_sim=-1, top_k=50, record_access=False) == []
    mem_now = {m.content for m in store.recall("anything", user_id="mem", min_sim=-1, top_k=50, record_access=False,
                                               kinds=RULE_KINDS)}
    assert mem_now == {"User lives in Zqkeptcity"}

    store.build()  # the next build
    assert store.recall("where does the user live?", user_id="gone", min_sim=-1, top_k=50, record_access=False) == []
    keep_now = {m.content for m in store.recall("anything", user_id="keep", min_sim=-1, top_k=50, record_access=False,
                                                kinds=RULE_KINDS)}
    assert keep_now == {"User prefers zqgonetea", "User lives in Zqbystander"}
    for marker in forgotten:
        assert files_containing(store, marker) == [], marker
        assert all_tables_containing(store, marker) == [], marker
    for marker in kept:
        assert files_containing(store, marker), marker

    # the audit record: what, when, by whom, counts; never content
    audit = [json.loads(line) for line in store.paths.audit.read_text().splitlines()]
    assert [(a["scope"], a["user_id"], a["memory_id"], a["actor"]) for a in audit] == [
        ("user", "gone", None, "dpo@example.org"), ("memory", "mem", mem_id, "dpo@example.org")]
    assert all(a["forgotten_at"] and a["removed"]["warehouse:long_term_memory"] >= 1 for a in audit)

    # no resurrection from the raw log, even when every incremental model is rebuilt from it;
    # a user who comes back after the forget is remembered again (rows landed later);
    # the forgotten memory stays forgotten even when restated
    store.remember("gone", "I live in Newtown.", ts=TS, message_id="g-new")
    store.remember("mem", "I prefer zqforgottentea.", ts=TS, message_id="m-again")
    store.build(full_refresh=True)
    assert {m.content for m in store.recall("where?", user_id="gone", min_sim=-1, top_k=50, record_access=False,
                                            kinds=RULE_KINDS)} == {
        "User lives in Newtown"}
    assert owned(store, "zqforgottentea") == [] and owned(store, "Zqgonecity") == []
    assert query(store, "select count(*) from session_messages where message_id in ('g-1', 'g-3', 'm-1')")[0][0] == 0
    assert query(store, "select count(*) from session_log_rejects where message_id = 'g-2'")[0][0] == 0


def test_forget_while_writers_land(tmp_path: Path) -> None:
    """Writers keep landing during forget: every row of the user landed up to forgotten_at is
    gone, every row landed later and every other user's row is kept."""
    store = MemoryStore(tmp_path / "store.duckdb")
    stop = threading.Event()
    written: dict[str, int] = {"target": 0, "other": 0}

    def writer(user: str) -> None:
        w = MemoryStore(store.paths.db)
        while not stop.is_set():
            w.remember(user, f"I prefer tea number {written[user]}.", ts=TS)
            written[user] += 1

    threads = [threading.Thread(target=writer, args=(u,)) for u in ("target", "other")]
    for t in threads:
        t.start()
    while min(written.values()) < 20:
        threading.Event().wait(0.01)
    rep = store.forget(user_id="target")
    while written["target"] < rep.removed["landing:messages"] + 20:
        threading.Event().wait(0.01)
    stop.set()
    for t in threads:
        t.join()

    landed = [json.loads(line) for f in store.paths.messages.glob("*.jsonl") for line in f.read_text().splitlines()]
    target = [r for r in landed if r["user_id"] == "target"]
    assert rep.removed["landing:messages"] >= 20
    assert rep.removed["landing:messages"] + len(target) == written["target"]
    assert target and all(r["landed_at"] > rep.forgotten_at for r in target)
    assert sum(r["user_id"] == "other" for r in landed) == written["other"]


def test_forget_waits_for_a_running_build(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "store.duckdb")
    store.remember("u", "I prefer tea.", ts=TS)
    done = threading.Event()

    def run() -> None:
        store.forget(user_id="u")
        done.set()

    with file_lock(store.paths.build_lock, exclusive=True):  # what MemoryStore.build holds
        t = threading.Thread(target=run)
        t.start()
        t.join(timeout=1.0)
        assert not done.is_set(), "forget ran while the build lock was held"
    t.join()
    assert done.is_set()
    assert [f for f in store.paths.messages.glob("*.jsonl") if f.name != "_empty.jsonl"] == []


def test_forget_cli(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.duckdb")
    MemoryStore(db).remember("carol", "I live in Zqcarolcity.", ts=TS)
    env = {**os.environ, "AGENT_MEMORY_ACTOR": "cli-test"}
    out = subprocess.run([EXE, "forget", "--user", "carol", "--db", db, "--json"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["actor"] == "cli-test" and rep["removed"]["landing:messages"] == 1 and rep["found"]
    store = MemoryStore(db)
    assert files_containing(store, "Zqcarolcity") == []
    out = subprocess.run([EXE, "forget", "--db", db], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "--user" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([EXE, "forget", "--user", "  ", "--db", db], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "non-empty" in out.stderr
    out = subprocess.run([EXE, "forget", "--memory", "mem_nope", "--db", db], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "tombstoned anyway" in out.stdout
    assert len(store.paths.audit.read_text().splitlines()) == 2
