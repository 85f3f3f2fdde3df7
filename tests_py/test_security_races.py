"""Recalls while builds publish and forgets purge, in real processes: no recall fails.

The race of issue 14b: two stores (or threads) of one process opening the same delta snapshot at
once both attached its layers (DuckDB shares one instance, and its attachments, per file), and
the second attach raised ``BinderException: database with name ... already exists``. Readers
here open fresh stores in lockstep rounds (a barrier), so every publish is opened by several
stores of one process at the same moment, while another process builds (publishing deltas,
pruning) and forgets (publishing a purged base, deleting every other snapshot).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recall_shim import MemoryStore

TS = "2026-11-01 10:00:00"

READER = """
import json, sys, threading, time, traceback
from pathlib import Path
from recall_shim import MemoryStore
db, stop, log, dim = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
THREADS = 4
barrier = threading.Barrier(THREADS)
counts = {"ok": 0, "errors": []}
def loop():
    while True:
        try:
            barrier.wait(timeout=120)
        except threading.BrokenBarrierError:
            return
        if stop.exists():
            barrier.abort()
            return
        try:
            with MemoryStore(db) as store:
                store.recall([1.0] * dim, user_id="keep", min_sim=-1, record_access=False)  # no model: no CPU
            counts["ok"] += 1
        except Exception:
            counts["errors"].append(traceback.format_exc())
        time.sleep(0.1)  # leave the builder the CPU
threads = [threading.Thread(target=loop) for _ in range(THREADS)]
[t.start() for t in threads]
[t.join() for t in threads]
Path(log).write_text(json.dumps(counts))
"""

CHURN = """
import sys
from pathlib import Path
from recall_shim import MemoryStore
store, CYCLES = MemoryStore(sys.argv[1]), int(sys.argv[3])
try:
    for i in range(CYCLES):
        store.remember("keep", f"I prefer tea number {i}.", ts="2026-11-02 10:00:00", message_id=f"k-new-{i}")
        store.build()  # publishes a delta over the base, prunes
        store.forget(user_id=f"victim{i}")  # publishes a purged base, deletes every other snapshot
finally:
    Path(sys.argv[2]).touch()
"""


@pytest.fixture(scope="module")
def race_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = MemoryStore(tmp_path_factory.mktemp("races") / "store.duckdb")
    store.remember_many([{"user_id": u, "session_id": u, "msg_seq": 1, "role": "user",
                          "content": f"I prefer {u} tea. I live in {u}town.", "ts": TS, "message_id": f"{u}-1"}
                         for u in ("keep", "victim0", "victim1")])
    store.build()
    return store.paths.db


CYCLES = 1  # build + forget; bounded: the readers stop when the churn is done


def test_recalls_during_builds_and_forgets_never_fail(race_store: Path, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    logs = [tmp_path / "reader0.json"]
    with MemoryStore(race_store) as store:
        dim = store._reader.settings.embedding_dim
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(race_store), str(stop), str(log), str(dim)])
               for log in logs]
    churn = subprocess.run([sys.executable, "-c", CHURN, str(race_store), str(stop), str(CYCLES)],
                           capture_output=True, text=True, timeout=900)
    for r in readers:
        assert r.wait(timeout=300) == 0
    assert churn.returncode == 0, churn.stderr[-3000:]
    results = [json.loads(log.read_text()) for log in logs]
    errors = [e for r in results for e in r["errors"]]
    assert errors == [], errors[:3]
    assert all(r["ok"] > 0 for r in results)
    print("recalls:", [r["ok"] for r in results])
    store = MemoryStore(race_store)
    assert store.recall("where does the user live?", user_id="victim0", min_sim=-1, record_access=False) == []
    audit = [a["user_id"] for a in map(json.loads, store.paths.audit.read_text().splitlines())]
    assert audit == [f"victim{i}" for i in range(CYCLES)]
