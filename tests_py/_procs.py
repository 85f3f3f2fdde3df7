"""Worker processes for the concurrency and crash tests (run as ``python -m tests_py._procs ...``).

Each worker is a real, separate process using the public API, so the tests exercise what agents
do: several writers landing messages, a builder running ``dbt build``, a reader loop recalling.
Acknowledgements are appended to a log file only after the API call returned (so after the write
is durable); a kill -9 can lose an unacknowledged write but never an acknowledged one.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from pathlib import Path

TOPICS = ["green tea", "short answers", "tables", "dark mode", "Python", "long walks", "jazz",
          "spicy food", "early meetings", "bullet points", "cats", "mountain hiking"]


def _ack(fh, obj: dict) -> None:
    fh.write(json.dumps(obj) + "\n")
    fh.flush()


def writer(db: str, name: str, ack_path: str, stop_path: str, max_writes: str, pause: str) -> None:
    """Land messages until ``stop_path`` exists or ``max_writes`` calls were made."""
    from recall_shim import MemoryStore

    store = MemoryStore(db)
    rng = random.Random(name)
    stop = Path(stop_path)
    with open(ack_path, "a", encoding="utf-8") as ack:
        for i in range(int(max_writes)):
            if stop.exists():
                break
            topic = rng.choice(TOPICS)
            if i % 4 == 3:  # every fourth call lands a small batch through remember_many
                rows = [{"user_id": name, "session_id": f"{name}-b{i}", "msg_seq": j, "role": "user",
                         "content": f"I like {topic} in batch {i} item {j}.", "ts": "2026-11-20 10:00:00",
                         "message_id": f"{name}-{i}-{j}"} for j in range(3)]
                store.remember_many(rows)
                for r in rows:
                    _ack(ack, {"message_id": r["message_id"], "user_id": name, "t": time.time()})
            else:
                mid = store.remember(name, f"I prefer {topic} for task {i}.", session_id=name, msg_seq=i,
                                     message_id=f"{name}-{i}")
                _ack(ack, {"message_id": mid, "user_id": name, "t": time.time()})
            if float(pause):
                time.sleep(float(pause) * rng.random() * 2)


def builder(db: str, log_path: str, builds: str, stop_path: str) -> None:
    """Run ``builds`` builds back to back, then create ``stop_path``; log each outcome."""
    from recall_shim import MemoryStore

    store = MemoryStore(db)
    with open(log_path, "a", encoding="utf-8") as log:
        try:
            for _ in range(int(builds)):
                started = time.time()
                try:
                    # a real dbt run every time: a plain build with nothing new landed yet would be
                    # skipped (recall_shim/build/inputs.py), and these tests are about dbt running
                    res = store.build(vars={"unchanged_build_max_age_hours": 0})
                    _ack(log, {"ok": True, "snapshot": res.snapshot, "started": started, "ended": time.time()})
                except Exception as exc:  # noqa: BLE001 - the test reads every failure
                    _ack(log, {"ok": False, "error": repr(exc), "output": getattr(exc, "output", "")[-3000:]})
        finally:
            if stop_path != "-":
                Path(stop_path).touch()


def reader(db: str, users: str, log_path: str, stop_path: str) -> None:
    """Recall in a loop until ``stop_path`` exists; log every success count and every error."""
    from recall_shim import MemoryStore

    store = MemoryStore(db)
    names = users.split(",")
    stop = Path(stop_path)
    ok = 0
    snapshots: set[str] = set()
    with open(log_path, "a", encoding="utf-8") as log:
        i = 0
        while not stop.exists():
            user = names[i % len(names)]
            i += 1
            try:
                store.recall(f"what does the user prefer about {TOPICS[i % len(TOPICS)]}?", user_id=user,
                             top_k=3, min_sim=0.0)
                ok += 1
                snapshots.add(str(store.snapshot_path))
            except Exception:  # noqa: BLE001 - the test reads every failure
                _ack(log, {"ok": False, "error": traceback.format_exc()})
            time.sleep(0.05)
        _ack(log, {"ok": True, "recalls": ok, "snapshots": sorted(snapshots)})


if __name__ == "__main__":
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    {"writer": writer, "builder": builder, "reader": reader}[sys.argv[1]](*sys.argv[2:])
