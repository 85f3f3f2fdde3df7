"""The shipped serving path, measured alone in its own process (so its peak RSS is its own):
``python -m benchmarks.recall_speed.serve STORE_DB QUERIES.npy USER TOP_K MIN_SIM`` prints JSON."""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def rss_mb(field: str = "VmRSS") -> float:
    """From /proc (ru_maxrss would include the parent's RSS from before exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(db: str, queries_path: str, user: str, top_k: str, min_sim: str) -> None:
    from recall_shim import MemoryStore

    queries = np.load(queries_path)
    started = time.perf_counter()
    store = MemoryStore(db)
    store.recall_many([queries[0]], user_id=user, top_k=int(top_k), min_sim=float(min_sim), record_access=False)
    open_s = time.perf_counter() - started
    loaded_rss = rss_mb()
    times, ids = [], []
    for q in queries:
        t = time.perf_counter()
        hits = store.recall_many([q], user_id=user, top_k=int(top_k), min_sim=float(min_sim), record_access=False)[0]
        times.append(time.perf_counter() - t)
        ids.append([h.memory_id for h in hits])
    print(json.dumps({
        "indexed": store._reader.indexed,
        "open_and_first_s": open_s,
        "times": times,
        "ids": ids,
        "rss_after_load_mb": loaded_rss,
        "peak_rss_mb": rss_mb("VmHWM"),
    }))


if __name__ == "__main__":
    main(*sys.argv[1:])
