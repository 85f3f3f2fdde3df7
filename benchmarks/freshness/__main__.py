"""Freshness of the hot tail over HTTP: ``python -m benchmarks.freshness [--rate 20] [--seconds 30]``.

Builds a small store (--users users x --base messages each) in a temp folder, starts the real
``agent-memory serve`` on 127.0.0.1 (bearer token) and runs three phases of --seconds each:

  without writer  --readers threads recall random users' memories back to back (closed loop:
                  they keep the server busy), or --reader-rate recalls/s in all (open loop)
  with writer     the same readers, plus a writer that remembers --rate messages per second
                  (POST /remember, random users): the recall ratio's phase
  writer+checker  the same again with other messages, and a checker that recalls each acknowledged
                  message's user until a result carries its message_id: by the message text's
                  vector, embedded by the checker before the phase starts (--checker vector, the
                  default), or by the text itself, which the server embeds again every round
                  (--checker text); a round (one request per user with pending messages) starts
                  at most every --checker-interval seconds (0 = back to back, as before
                  2026-12-07: the checker then loaded the server as much as the readers and the
                  writer together, so it inflated both figures it measures)

and prints the time from an acknowledged ``remember`` to the first recall that returns it
(p50 / p99; goal p99 <= 2 s) and the readers' recall latency with vs without the writer (p50 /
p99 and their ratios; goal within 1.5x), and beside the writer and the checker (before
2026-12-07 the ratio was measured in that phase, so it counted the checker's load as the
writer's). No build runs during the phases: every new message is
served by the hot tail (docs/serving.md "Hot tail").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.server import running_server
from recall_shim.common.embedding import embed_texts

THINGS = ("green tea", "jazz records", "mountain hiking", "spicy food", "dark mode", "python scripts",
          "long walks", "board games", "sourdough bread", "old violins", "red canoes", "apple trees",
          "chess openings", "night trains", "watercolour paintings", "vintage cameras")
PLACES = ("Lisbon", "Oslo", "Kyoto", "Quito", "Tallinn", "Hobart", "Leipzig", "Porto", "Nairobi", "Austin")
QUESTIONS = ("what does the user like?", "where has the user been?", "what hobbies does the user have?",
             "what does the user do on weekends?", "which city did the user mention?")


def _sentence(rng: random.Random, n: int) -> str:
    return (f"On trip {n} to {rng.choice(PLACES)} we talked about {rng.choice(THINGS)} and "
            f"{rng.choice(THINGS)} until late, code word k{n:05d}.")


def _quantiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))]


class _Readers:
    """``n`` threads recalling random users; latencies in seconds. ``rate`` None: back to back
    (closed loop: the readers alone keep the lane busy); else open loop, ``rate`` recalls per
    second in all, each thread on its own schedule, latency counted from the scheduled start (a
    late recall counts its wait too)."""

    def __init__(self, url: str, headers: dict[str, str], users: list[str], n: int, seed: int,
                 rate: float | None = None) -> None:
        self.times: list[float] = []
        self.errors = 0
        self._period = None if not rate else n / rate
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(url, headers, users, seed + i), daemon=True)
                         for i in range(n)]

    def _run(self, url: str, headers: dict[str, str], users: list[str], seed: int) -> None:
        rng = random.Random(seed)
        due = time.perf_counter() + (rng.random() * self._period if self._period else 0.0)
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            while not self._stop.is_set():
                body = {"user_id": rng.choice(users), "query": rng.choice(QUESTIONS), "top_k": 5, "min_sim": 0,
                        "record_access": False}
                if self._period:
                    if self._stop.wait(max(0.0, due - time.perf_counter())):
                        break
                    t = due
                    due += self._period
                else:
                    t = time.perf_counter()
                r = client.post("/recall", json=body)
                self.times.append(time.perf_counter() - t)
                if r.status_code != 200:
                    self.errors += 1

    def __enter__(self) -> "_Readers":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)


def _phase_messages(users: list[str], rate: float, seconds: float, seed: int, vector_model: str | None,
                    first: int = 10_000) -> tuple[list[tuple[str, str]], dict[str, list[float]]]:
    """The writer's (user, content) pairs, and the checker's vector of each content (the store's
    model, query form) when ``vector_model`` is given: made before the phase and its readers
    start, so the checker's own embedding does not compete with the server for the cores."""
    rng = random.Random(seed)
    contents = [(rng.choice(users), _sentence(rng, first + i)) for i in range(int(rate * seconds) + 1)]
    vectors: dict[str, list[float]] = {}
    if vector_model is not None:
        texts = [c for _, c in contents]
        vectors = {c: [float(x) for x in v] for c, v in zip(texts, embed_texts(vector_model, "query", texts))}
    return contents, vectors


def _writer_phase(url: str, headers: dict[str, str], rate: float, seconds: float,
                  contents: list[tuple[str, str]], vectors: dict[str, list[float]],
                  interval: float = 0.0, check: bool = True) -> tuple[list[float], int, int]:
    """Remember ``contents`` at ``rate`` per second for ``seconds``; a checker recalls each
    acknowledged message until it is returned. Returns (seconds to recallable per message,
    written, missed). The checker recalls by the content's vector in ``vectors``; with none, by
    the text, which the server embeds every round (its own load then grows with the backlog)."""
    n_max = len(contents)
    pending: list[tuple[str, str, str, float]] = []  # (message_id, user, content, acknowledged at)
    lock = threading.Lock()
    done = threading.Event()
    fresh: list[float] = []

    def check_round() -> None:
        # one /recall-many per user with pending messages (their texts as the queries), so a round
        # costs one request per user: the time measured is an upper bound (it includes the round)
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            next_round = time.monotonic()
            while not (done.is_set() and not pending):
                time.sleep(max(0.0, next_round - time.monotonic()))
                with lock:
                    todo = list(pending)
                if not todo:
                    time.sleep(0.01)
                    continue
                next_round = time.monotonic() + interval
                by_user: dict[str, list[tuple[str, str, str, float]]] = {}
                for item in todo:
                    by_user.setdefault(item[1], []).append(item)
                for user, items in by_user.items():
                    items = items[:32]
                    queries = [vectors.get(i[2], i[2]) for i in items]
                    r = client.post("/recall-many", json={"user_id": user, "queries": queries,
                                                          "top_k": 3, "min_sim": 0, "record_access": False})
                    now = time.monotonic()
                    groups = r.json()["results"] if r.status_code == 200 else [[] for _ in items]
                    for item, group in zip(items, groups):
                        got = any(item[0] in m["source_message_ids"] for m in group)
                        if got or now - item[3] > 60:
                            with lock:
                                pending.remove(item)
                            if got:
                                fresh.append(now - item[3])

    checker = threading.Thread(target=check_round, daemon=True) if check else None
    if checker is not None:
        checker.start()
    written = 0
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        start = time.monotonic()
        while time.monotonic() - start < seconds and written < n_max:
            due = start + written / rate
            time.sleep(max(0.0, due - time.monotonic()))
            user, content = contents[written]
            r = client.post("/remember", json={"user_id": user, "content": content, "session_id": "bench"})
            acked = time.monotonic()
            if r.status_code == 202 and check:
                with lock:
                    pending.append((r.json()["message_id"], user, content, acked))
            written += 1
    done.set()
    if checker is None:
        return fresh, written, 0
    checker.join(timeout=180)
    return fresh, written, written - len(fresh)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.freshness", description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=20, help="users in the store (default 20)")
    ap.add_argument("--base", type=int, default=50, help="messages per user built into the snapshot (default 50)")
    ap.add_argument("--rate", type=float, default=20, help="writer: messages per second (default 20)")
    ap.add_argument("--seconds", type=float, default=30, help="length of each phase (default 30)")
    ap.add_argument("--readers", type=int, default=2, help="reader threads (default 2)")
    ap.add_argument("--reader-rate", type=float, default=None,
                    help="recalls per second of all readers together (open loop, latency from each "
                         "recall's scheduled start); default: back to back (closed loop)")
    ap.add_argument("--checker", choices=("vector", "text"), default="vector",
                    help="vector (default): the checker embeds each message once and recalls by vector; "
                         "text: it sends the text every round (the server embeds it each time)")
    ap.add_argument("--checker-interval", type=float, default=0.1,
                    help="seconds between the starts of the checker's rounds (default 0.1; 0: back to back)")
    ap.add_argument("--target", choices=("duckdb", "postgres"), default="duckdb",
                    help="duckdb (default) or postgres (a bundled pgserver PostgreSQL in the temp folder)")
    ap.add_argument("--vars", type=json.loads, default=None, metavar="JSON",
                    help="dbt vars for the base store's build, e.g. '{\"conversation_lift_weight\": 0}' "
                         "(measure a setting against the shipped one)")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    with tempfile.TemporaryDirectory(prefix="freshness-") as tmp:
        if args.target == "duckdb":
            from recall_shim import MemoryStore

            return _run(args, MemoryStore(Path(tmp) / "fresh.duckdb"), Path(tmp), None)
        from recall_shim import LocalPostgres, PgMemoryStore

        server = LocalPostgres(Path(tmp) / "pg")
        try:
            conn = server.start()
            env = {**conn.dbt_env(), "AGENT_MEMORY_PG_WORK_DIR": str(Path(tmp) / "pgwork")}
            return _run(args, PgMemoryStore(conn, work_dir=Path(tmp) / "pgwork"), Path(tmp), env)
        finally:
            server.stop()


def _run(args: argparse.Namespace, store: Any, tmp: Path, env: dict[str, str] | None) -> int:
    """Build the base store, serve it, run both phases and print the figures."""
    rng = random.Random(17)
    users = [f"user{i:03d}" for i in range(args.users)]
    store.remember_many([{"user_id": u, "content": _sentence(rng, i * args.users + j), "session_id": "base",
                          "msg_seq": i, "role": "user", "ts": "2026-12-01 10:00:00",
                          "message_id": f"base-{u}-{i}"} for i in range(args.base) for j, u in enumerate(users)])
    print(f"building the base store ({args.users} users x {args.base} messages) ...", flush=True)
    t = time.monotonic()
    store.build(vars=args.vars)
    print(f"built in {time.monotonic() - t:.1f} s", flush=True)
    with running_server(None if env else store.paths.db, tmp / "server.log", env) as (url, headers):
        with _Readers(url, headers, users, 1, 1):
            time.sleep(3)  # warm up
        with _Readers(url, headers, users, args.readers, 100, args.reader_rate) as idle:
            time.sleep(args.seconds)
        model = httpx.get(url + "/health", headers=headers).json()["embedding_model"]
        contents, vectors = _phase_messages(users, args.rate, args.seconds, 300,
                                            model if args.checker == "vector" else None)
        unchecked, _ = _phase_messages(users, args.rate, args.seconds, 400, None, first=50_000)
        # the readers beside the writer alone (the ratio's phase), then beside the writer and the
        # checker that measures freshness (its rounds are recalls too, and load the server)
        with _Readers(url, headers, users, args.readers, 200, args.reader_rate) as loaded:
            _writer_phase(url, headers, args.rate, args.seconds, unchecked, {}, check=False)
        with _Readers(url, headers, users, args.readers, 300, args.reader_rate) as checked:
            fresh, written, missed = _writer_phase(url, headers, args.rate, args.seconds, contents, vectors,
                                                   args.checker_interval)
    f50, f99 = _quantiles(fresh) if fresh else (float("nan"), float("nan"))
    i50, i99 = _quantiles(idle.times)
    l50, l99 = _quantiles(loaded.times)
    c50, c99 = _quantiles(checked.times)
    print(f"\ntarget: {args.target}; writer: {written} messages at {args.rate:g}/s over HTTP; readers: {args.readers} threads, "
          f"{'back to back' if not args.reader_rate else f'{args.reader_rate:g} recalls/s in all'}; "
          f"checker: by {args.checker}, a round at most every {args.checker_interval:g} s; "
          f"store: {args.users} users x {args.base} messages in the snapshot")
    print(f"time to recallable (acknowledged remember -> first recall returning it): p50 {f50 * 1000:.0f} ms, "
          f"p99 {f99 * 1000:.0f} ms over {len(fresh)} messages ({missed} not returned within 60 s)")
    print(f"{'recall latency':<22} {'n':>6} {'p50 ms':>8} {'p99 ms':>8}")
    print(f"{'without writer':<22} {len(idle.times):>6} {i50 * 1000:>8.1f} {i99 * 1000:>8.1f}")
    print(f"{'with writer':<22} {len(loaded.times):>6} {l50 * 1000:>8.1f} {l99 * 1000:>8.1f}")
    print(f"{'ratio with / without':<22} {'':>6} {l50 / i50:>8.2f} {l99 / i99:>8.2f}")
    print(f"{'writer + checker':<22} {len(checked.times):>6} {c50 * 1000:>8.1f} {c99 * 1000:>8.1f}"
          f"   (ratio {c50 / i50:.2f} / {c99 / i99:.2f}: the checker's rounds load the server too)")
    print(f"reader errors: {idle.errors + loaded.errors + checked.errors}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
