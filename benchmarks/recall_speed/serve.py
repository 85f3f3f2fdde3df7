"""The shipped serving path, measured alone in its own process (so its peak RSS is its own):
``python -m benchmarks.recall_speed.serve STORE_DB QUERIES.npy USER TOP_K MIN_SIM [TEXTS.json]``
prints JSON. With TEXTS.json (one query text per vector) each recall gets its vector *and* its
text, for the hybrid fusion's lexical leg: it calls ``SnapshotReader.run`` (what
``MemoryStore.recall_many`` runs after embedding the text), since the benchmark's vectors are
synthetic, not embeddings of the texts."""

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


def main(db: str, queries_path: str, user: str, top_k: str, min_sim: str, texts_path: str | None = None) -> None:
    from recall_shim import MemoryStore

    queries = np.load(queries_path)
    texts = json.loads(open(texts_path).read()) if texts_path else None
    started = time.perf_counter()
    store = MemoryStore(db)

    def recall(i: int) -> list:
        if texts is None:
            return store.recall_many([queries[i]], user_id=user, top_k=int(top_k), min_sim=float(min_sim),
                                     record_access=False)[0]
        return store._reader.run(user, [queries[i].tolist()], int(top_k), float(min_sim), None, [texts[i]])[0]

    recall(0)
    open_s = time.perf_counter() - started
    loaded_rss = rss_mb()
    times, ids = [], []
    for i in range(len(queries)):
        t = time.perf_counter()
        hits = recall(i)
        times.append(time.perf_counter() - t)
        ids.append([h.memory_id for h in hits])
    print(json.dumps({
        "indexed": store._reader.indexed,
        "hybrid": store._reader._hybrid is not None,
        "open_and_first_s": open_s,
        "times": times,
        "ids": ids,
        "rss_after_load_mb": loaded_rss,
        "peak_rss_mb": rss_mb("VmHWM"),
    }))


if __name__ == "__main__":
    main(*sys.argv[1:])
