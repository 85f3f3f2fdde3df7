"""A light caller's recall latency while a heavy caller floods the server:
``python -m benchmarks.security_flood [--light 150] [--heavy-callers 2]``.

Builds a small store (the demo log) in a temp folder, starts the real ``agent-memory serve`` on
127.0.0.1 (bearer token), and times one short ``POST /recall`` at a time (p50, p99):

  unloaded        nobody else calls
  attack          heavy threads send /recall-many with 32 x 2,000-character queries (the issue's
                  attack; the server refuses it with 413 before any work)
  heavy, allowed  heavy threads send the most one request may ask for (4 x 2,000 characters,
                  the per-request bound of 8,000) back to back

and prints each loaded/unloaded ratio (goal: within 2x). Loopback only; bounded in count
(--light recalls per phase) and time (--max-seconds per phase).
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
import httpx

from benchmarks.server import running_server

from .heavy import heavy_caller

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("the user likes green tea long walks in the mountains jazz records spicy food and early "
         "meetings about python data pipelines with tables and dark mode").split()


def _long_text(rng: random.Random, chars: int) -> str:
    out = " ".join(rng.choice(WORDS) for _ in range(chars // 3))
    return out[:chars]


def _quantiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))]


def _light(client: httpx.Client, n: int, max_seconds: float) -> list[float]:
    times = []
    deadline = time.monotonic() + max_seconds
    for i in range(n):
        if time.monotonic() > deadline:
            break
        t = time.perf_counter()
        r = client.post("/recall", json={"user_id": "demo", "query": f"喜欢什么输出方式 {i}", "top_k": 3,
                                         "min_sim": 0, "record_access": False})
        times.append(time.perf_counter() - t)
        assert r.status_code == 200, r.text
        time.sleep(0.05)
    return times


def _phase(client: httpx.Client, url: str, headers: dict, n: int, max_seconds: float, callers: int,
           body: dict | None) -> tuple[list[float], dict[int, int]]:
    ctx = multiprocessing.get_context("spawn")
    manager = ctx.Manager()
    stop, answers = manager.Event(), manager.list()
    raw = json.dumps(body).encode() if body else b""
    workers = [ctx.Process(target=heavy_caller, args=(url, headers, raw, stop, answers), daemon=True)
               for _ in range(callers if body else 0)]
    for w in workers:
        w.start()
    time.sleep(3.0 if body else 0)  # the heavy callers are up and calling
    try:
        return _light(client, n, max_seconds), dict(collections.Counter(answers))
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=120)
        manager.shutdown()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.security_flood", description=__doc__.split("\n\n")[0])
    ap.add_argument("--light", type=int, default=150, help="light recalls per phase (default 150)")
    ap.add_argument("--heavy-callers", type=int, default=2, help="heavy callers, one process each (default 2)")
    ap.add_argument("--max-seconds", type=float, default=120, help="cap per phase (default 120)")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    from recall_shim import MemoryStore

    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="security_flood-") as tmp:
        store = MemoryStore(Path(tmp) / "flood.duckdb")
        store.ingest(ROOT / "demo" / "session_log.jsonl")
        print("building a small store (demo log) ...", flush=True)
        store.build()
        with running_server(store.paths.db, Path(tmp) / "server.log") as (url, headers):
            attack = {"user_id": "heavy", "queries": [_long_text(rng, 2000) for _ in range(32)],
                      "record_access": False}
            allowed = {"user_id": "heavy", "queries": [_long_text(rng, 2000) for _ in range(4)],
                       "record_access": False}
            with httpx.Client(base_url=url, headers=headers, timeout=600) as client:
                _light(client, 5, 30)  # warm up
                base, _ = _phase(client, url, headers, args.light, args.max_seconds, 0, None)
                rows = [("unloaded", base, {})]
                for name, body in (("attack 32x2000", attack), ("heavy 4x2000", allowed)):
                    times, statuses = _phase(client, url, headers, args.light, args.max_seconds,
                                             args.heavy_callers, body)
                    rows.append((name, times, statuses))
                again, _ = _phase(client, url, headers, args.light, args.max_seconds, 0, None)
                rows.append(("unloaded again", again, {}))
    b50, b99 = _quantiles(base)
    print(f"\nlight caller: one short POST /recall at a time; heavy callers: {args.heavy_callers} processes")
    print(f"{'phase':<16} {'n':>4} {'p50 ms':>8} {'p99 ms':>8} {'p50 x':>6} {'p99 x':>6}  heavy answers")
    for name, times, statuses in rows:
        p50, p99 = _quantiles(times)
        print(f"{name:<16} {len(times):>4} {p50 * 1000:>8.1f} {p99 * 1000:>8.1f} {p50 / b50:>6.2f} {p99 / b99:>6.2f}  "
              + (", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())) or "-"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
