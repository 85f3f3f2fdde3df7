"""Many writers, no collisions: four writer processes land messages while a builder process runs
``dbt build`` and a reader process recalls in a loop. Every acknowledged row reaches the marts,
no reader sees an error, no build fails, and writers never wait for a build."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from recall_shim import MemoryStore

from .conftest import ROOT, query

WRITERS = ["w1", "w2", "w3", "w4"]


def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests_py._procs", *args], cwd=ROOT)


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def landed_access_rows(store: MemoryStore) -> int:
    return sum(
        1 for f in store.paths.access.glob("*.jsonl") for line in f.read_text().splitlines() if line.strip()
    )


def test_writers_builder_and_reader_run_together(tmp_path: Path) -> None:
    db = str(tmp_path / "store.duckdb")  # the name the suite's stores share: dbt's parse is shared (parse_cache.py)
    store = MemoryStore(db)
    for name in WRITERS:  # every user has a memory before the reader starts
        store.remember(name, "I prefer quiet mornings.", session_id="warmup", msg_seq=0, message_id=f"{name}-warm")
    store.build()

    stop = tmp_path / "stop"
    acks = {w: tmp_path / f"ack-{w}.jsonl" for w in WRITERS}
    build_log, read_log_path = tmp_path / "builds.jsonl", tmp_path / "reads.jsonl"
    procs = [spawn("writer", db, w, str(acks[w]), str(stop), "40", "0.1") for w in WRITERS]
    builder = spawn("builder", db, str(build_log), "2", str(stop))
    reader = spawn("reader", db, ",".join(WRITERS), str(read_log_path), str(stop))
    try:
        assert builder.wait(timeout=300) == 0
        for p in procs:
            assert p.wait(timeout=120) == 0
        assert reader.wait(timeout=60) == 0
    finally:
        for p in [*procs, builder, reader]:
            if p.poll() is None:
                p.kill()
    builds = read_log(build_log)
    assert len(builds) == 2 and all(b["ok"] for b in builds), builds
    reads = read_log(read_log_path)
    errors = [r for r in reads if not r["ok"]]
    assert errors == [], errors[0]["error"]
    summary = reads[-1]
    assert summary["recalls"] > 0

    # nobody waited for the build: every writer had writes acknowledged while a build ran
    acked = {w: [r["message_id"] for r in read_log(acks[w])] for w in WRITERS}
    for w in WRITERS:
        during = [r for r in read_log(acks[w]) if any(b["started"] < r["t"] < b["ended"] for b in builds)]
        assert during, f"writer {w} landed nothing while a build ran"

    final = store.build()
    assert final.snapshot is not None
    loaded = {r[0] for r in query(store, "select message_id from session_messages")}
    missing = [m for ids in acked.values() for m in ids if m not in loaded]
    assert missing == [], f"{len(missing)} acknowledged messages never reached session_messages"
    assert query(store, "select count(*) from session_log_rejects")[0][0] == 0
    # every acknowledged message became (part of) a memory of its user
    sources = {s for (ids,) in query(store, "select source_message_ids from long_term_memory") for s in ids}
    assert [m for ids in acked.values() for m in ids if m not in sources] == []
    # every access event the reader landed was loaded exactly once
    assert query(store, "select count(*), count(distinct event_id) from stg_recall_events")[0] == (
        landed_access_rows(store), landed_access_rows(store))
    # and the final snapshot serves all of it
    current = query(store, "select count(*) from long_term_memory where user_id = 'w1' and valid_to is null")[0][0]
    hits = store.recall("what does the user prefer?", user_id="w1", top_k=100, min_sim=-1, record_access=False)
    assert len(hits) == min(100, current) and {h.memory_id for h in hits} <= {
        r[0] for r in query(store, "select memory_id from long_term_memory where user_id = 'w1'")}
