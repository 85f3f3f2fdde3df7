"""``--target postgres`` of the ingest benchmark (docs/scaling_out.md, "Incremental builds").

The same base stores and increments as the DuckDB run (``__main__``: users of ``--user-size``
messages over at most 1,000 distinct sentences; then ``--increment`` messages with new, distinct
sentences over random users), each size in its own schema of one PostgreSQL 16 + pgvector server
started from the pgserver wheel, built with ``PgMemoryStore.build`` (two dbt steps around the
Python embedding). It prints, per size, the base build and the incremental build by step, and the
dbt nodes of the incremental build's second step that took longest.

    python -m benchmarks.ingest_speed --target postgres --sizes 9000,45000 --increment 10000
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from .__main__ import base_sentences, land


def _slowest(store: Any, n: int = 8) -> list[tuple[str, float]]:
    data = json.loads((Path(store.work_dir) / "target" / "run_results.json").read_text())
    nodes = sorted(((r["unique_id"].split(".", 2)[-1], float(r["execution_time"])) for r in data["results"]),
                   key=lambda x: -x[1])
    return nodes[:n]


def _sizes(store: Any) -> dict[str, float]:
    with store.conn.connect() as con:
        rows = con.execute("select count(*) filter (where valid_to is null), count(*),"
                           " pg_total_relation_size(%s)::float8 / 2^20 from " + f"{store.conn.schema}.long_term_memory",
                           [f"{store.conn.schema}.long_term_memory"]).fetchone()
    return {"current_memories": int(rows[0]), "memories": int(rows[1]), "long_term_memory_mb": float(rows[2])}


def run_size(conn: Any, n: int, increment: int, work: Path, user_size: int) -> dict:
    from recall_shim import PgMemoryStore

    schema_conn = dataclasses.replace(conn, schema=f"ingest{n}")
    store = PgMemoryStore(schema_conn, work_dir=work / f"pg-work-{n}")
    sentences = base_sentences()
    users = max(1, -(-n // user_size))
    t = time.perf_counter()
    for start in range(0, users, 50):  # 50 users per transaction
        store.remember_many([{"user_id": f"u{u:05d}", "session_id": f"s{u}", "msg_seq": i, "role": "user",
                              "content": sentences[i % len(sentences)], "ts": "2026-11-01 10:00:00",
                              "message_id": f"b{u}-{i}"}
                             for u in range(start, min(users, start + 50))
                             for i in range(min(user_size, n - u * user_size))])
    print(f"[postgres n={n}] landed base in {time.perf_counter() - t:.1f}s; base build...", flush=True)
    base = store.build()
    base_stages, base_sizes = dict(store.last_build_stages), _sizes(store)
    print(f"[postgres n={n}] base build {base.seconds:.0f}s {base_stages}; landing the increment...", flush=True)
    land_s = land(store, users, increment, n, "inc", "2026-11-20 10:00:00")
    inc = store.build()
    stages = dict(store.last_build_stages)
    print(f"[postgres n={n}] incremental build {inc.seconds:.0f}s {stages}", flush=True)
    return {"target": "postgres", "n": n, "increment": increment, "user_size": user_size,
            "base_build_s": base.seconds, "base_stages": base_stages, "base_sizes": base_sizes,
            "land_increment_s": land_s, "incremental_build_s": inc.seconds, "stages": stages,
            "sizes": _sizes(store), "slowest_nodes": _slowest(store)}


def run(sizes: list[int], increment: int, work: Path, user_size: int) -> list[dict]:
    from recall_shim import LocalPostgres

    server = LocalPostgres(work / "pg-data")
    conn = server.start()
    # the builds' sessions get the index memory docs/scaling_out.md ("Index memory") advises for
    # the owner role: at 1M memories the HNSW graph does not fit the default 64 MB
    with conn.connect(autocommit=True) as con:
        con.execute("alter role current_user set maintenance_work_mem = '4GB'")
    try:
        return [run_size(conn, n, increment, work, user_size) for n in sizes]
    finally:
        server.stop()


def report(results: list[dict]) -> str:
    lines = ["| store: messages / memories (current) | + new messages | base build s | incremental build s |"
             " without the embedding s | long_term_memory MB |", "|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        s = r["sizes"]
        lines.append(f"| {r['n']:,} / {s['memories']:,} ({s['current_memories']:,}) | {r['increment']:,} "
                     f"| {r['base_build_s']:.0f} | {r['incremental_build_s']:.1f} "
                     f"| {r['incremental_build_s'] - r['stages']['embedding (new texts)']:.1f} "
                     f"| {s['long_term_memory_mb']:,.0f} |")
    lines += ["", "| incremental build, seconds per step | " + " | ".join(f"{r['n']:,}" for r in results) + " |",
              "|---|" + "---:|" * len(results)]
    for name in results[0]["stages"]:
        lines.append(f"| {name} | " + " | ".join(f"{r['stages'][name]:.1f}" for r in results) + " |")
    if len(results) > 1:
        lo, hi = results[0], results[-1]
        ex = [r["incremental_build_s"] - r["stages"]["embedding (new texts)"] for r in (lo, hi)]
        lines.append(f"\nstore {hi['n'] / lo['n']:.0f}x larger: incremental build {hi['incremental_build_s'] / lo['incremental_build_s']:.2f}x "
                     f"the time, {ex[1] / ex[0]:.2f}x without the embedding")
    for r in results:
        lines.append(f"slowest dbt nodes of the second step at {r['n']:,}: "
                     + ", ".join(f"{name} {sec:.1f}s" for name, sec in r["slowest_nodes"]))
    return "\n".join(lines)
