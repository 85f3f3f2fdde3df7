"""Recall latency at scale: ``python -m benchmarks.recall_speed [--sizes 100000,1000000] [--dim 1536] [--quick]
[--target postgres]``.

For each store size it writes a synthetic serving snapshot (benchmarks/recall_speed/synth.py),
builds its serving index the way ``MemoryStore.build`` does, and measures, in one run, one query
at a time, top-10 for the big user (99% of the memories: the worst case for per-user indexes):

  reference recall   the reference design's recall() as written (new connection per call,
                     list_cosine_similarity over DOUBLE[dim], ORDER BY without LIMIT, fetch all)
  duckdb compiled    the compiled recall statement over the snapshot (what serving ran before
                     the index), on an open connection
  numpy exact        normalised float32 matrix in RAM, matvec + argpartition, strength-weighted
  shipped            MemoryStore.recall_many with a precomputed vector, in a separate process
                     (its peak RSS is reported alone)

recall@10 is against exact float64 brute force with the same formula. No embedding model runs:
queries are vectors, so only recall itself is timed.

Then the same for the shipped default, the hybrid ``weighted`` fusion (cosine min-max normalised
per query over the user's memories, plus saturated BM25 over the snapshot's term index, times the
strength factor; docs/recall.md), each query with a vector and a text:

  duckdb compiled    the compiled weighted recall statement (the spec; what serving ran before)
  numpy exact        float32 matrix in RAM (all cosines, min and max) + the same BM25 postings
                     as the shipped path + the fused score of every memory
  shipped            SnapshotReader.run with vector + text: index + lexical statement
                     (recall_shim/serving/hybrid.py), in a separate process
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np

from recall_shim.serving.fusion import fusion_of
from recall_shim.serving.index import index_dir
from recall_shim.serving.index_build import build_index
from recall_shim.serving.snapshot import connect_snapshot
from recall_shim.serving.terms import TermPostings, build_term_postings, tokenize

from .synth import (BIG_USER, CHUNK, ROOT, SynthSpec, compiled_recall_queries, queries, query_texts, reference_table,
                    use_fusion, write_snapshot)

TOP_K = 10


def big_user_matrix(spec: SynthSpec, con: duckdb.DuckDBPyConnection) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(memory ids, float32 unit vectors, strengths) of the big user, read from the snapshot."""
    ids, strengths, mats = [], [], []
    rel = con.sql(f"select memory_id, strength, embedding from long_term_memory where user_id = '{BIG_USER}'")
    for batch in rel.to_arrow_reader(CHUNK):
        ids.append(np.asarray(batch.column(0).to_numpy(zero_copy_only=False)))
        strengths.append(batch.column(1).to_numpy())
        mats.append(batch.column(2).flatten().to_numpy().reshape(batch.num_rows, spec.dim))
    x = np.concatenate(mats).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return np.concatenate(ids), x, np.concatenate(strengths)


def exact_truth(ids: np.ndarray, x: np.ndarray, s: np.ndarray, q: np.ndarray, min_sim: float) -> list[str]:
    """float32 screening, then float64 re-rank of everything near the k-th score."""
    cos = x @ q.astype(np.float32)
    score = np.where(cos >= min_sim - 1e-4, s * cos, -np.inf)
    cand = np.argpartition(-score, 2000)[:2000]
    c64 = x[cand].astype(np.float64) @ q.astype(np.float64)
    ok = c64 >= min_sim
    cand, c64 = cand[ok], c64[ok]
    sc = s[cand] * c64
    order = np.lexsort((ids[cand], -sc))[:TOP_K]
    return [str(ids[cand[i]]) for i in order]


def numpy_exact(ids: np.ndarray, x: np.ndarray, s: np.ndarray, q: np.ndarray, min_sim: float) -> list[str]:
    cos = x @ q.astype(np.float32)
    score = np.where(cos >= min_sim, s * cos, -np.inf)
    top = np.argpartition(-score, TOP_K)[:TOP_K]
    top = top[np.argsort(-score[top])]
    return [str(ids[i]) for i in top if np.isfinite(score[i])]


class Hybrid:
    """The weighted fusion over the big user's in-RAM matrix, with the lexical leg from the
    same term postings as the shipped path (BM25 as the compiled statement; the tests check
    the two agree): ``numpy_exact`` (what a brute-force server would do) and ``truth`` (float64
    re-rank of everything near the k-th score)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, snap: Path, ids: np.ndarray, x: np.ndarray, s: np.ndarray) -> None:
        rows = {r["query_name"]: r for r in con.sql("select * from recall_queries_weighted").to_arrow_table().to_pylist()}
        row = rows["recall"]
        self.w, self.sat, sw = row["fusion_vector_weight"], row["lexical_saturation"], row["strength_weight"]
        self.recall_sql = row["sql_text"]
        _, self.lexicon = fusion_of(rows)
        folder = index_dir(snap)
        users = np.load(folder / "users.npy")
        self.user = int(np.searchsorted(users, BIG_USER.encode()))
        self.postings = TermPostings(folder, users)
        lo, hi = np.load(folder / "user_start.npy")[self.user]
        self.lo = int(lo)
        order = np.argsort(ids)
        index_ids = np.load(folder / "memory_id.npy", mmap_mode="r")[lo:hi].astype(str)
        self.pos_of_row = order[np.searchsorted(ids[order], index_ids)]  # index row -> matrix row
        self.con, self.ids, self.x = con, ids, x
        self.factor = 1 - sw + sw * s  # no questions among the synthetic memories

    def lexical(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        terms = tokenize(text, self.lexicon, self.con)
        rows, ls = self.postings.scores(self.user, terms, self.lexicon.k1, self.lexicon.b)
        return self.pos_of_row[rows - self.lo], ls

    def score(self, cos: np.ndarray, idx: np.ndarray, ls: np.ndarray, mn: float, mx: float, rows=None) -> np.ndarray:
        rel = self.w * (cos - mn) / (mx - mn)
        lex = np.zeros(len(self.ids))
        lex[idx] = (1 - self.w) * ls / (ls + self.sat)
        rows = slice(None) if rows is None else rows
        return (rel + lex[rows]) * self.factor[rows]

    def numpy_exact(self, q: np.ndarray, text: str, min_sim: float) -> list[str]:
        idx, ls = self.lexical(text)
        cos = (self.x @ q.astype(np.float32)).astype(np.float64)
        score = np.where(cos >= min_sim, self.score(cos, idx, ls, cos.min(), cos.max()), -np.inf)
        top = np.argpartition(-score, TOP_K)[:TOP_K]
        top = top[np.argsort(-score[top])]
        return [str(self.ids[i]) for i in top if np.isfinite(score[i])]

    def truth(self, q: np.ndarray, text: str, min_sim: float) -> list[str]:
        idx, ls = self.lexical(text)
        cos = (self.x @ q.astype(np.float32)).astype(np.float64)
        q64 = q.astype(np.float64)
        exact = lambda r: self.x[r].astype(np.float64) @ q64  # noqa: E731  (rows are unit vectors)
        mx = float(exact(np.flatnonzero(cos >= cos.max() - 1e-5)).max())
        mn = float(exact(np.flatnonzero(cos <= cos.min() + 1e-5)).min())
        approx = np.where(cos >= min_sim - 1e-4, self.score(cos, idx, ls, mn, mx), -np.inf)
        cand = np.argpartition(-approx, 2000)[:2000]
        c64 = exact(cand)
        sc = np.where(c64 >= min_sim, self.score(c64, idx, ls, mn, mx, rows=cand), -np.inf)
        order = np.lexsort((self.ids[cand], -sc))[:TOP_K]
        return [str(self.ids[cand[i]]) for i in order if np.isfinite(sc[i])]


def reference_recall(path: Path, dim: int, prompt_emb: list[float], top_k: int, min_sim: float) -> list[str]:
    """The reference design's recall(), as written there (only the dimension differs)."""
    con = duckdb.connect(str(path))
    rows = con.execute(
        f"""
        SELECT content,
        strength * list_cosine_similarity(embedding, ?::DOUBLE[{dim}]) AS w
        FROM long_term_memory
        ORDER BY w DESC
        """,
        [prompt_emb],
    ).fetchall()
    memories = [c for c, w in rows[:top_k] if w > min_sim]
    con.close()
    return memories


def timed(fn, items: list) -> tuple[list[float], list]:
    out, times = [], []
    for it in items:
        t = time.perf_counter()
        out.append(fn(it))
        times.append(time.perf_counter() - t)
    return times, out


def pct(times: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(times) * 1e3, p))


def recall_at_k(found: list[list[str]], truth: list[list[str]]) -> float:
    return float(np.mean([len(set(f) & set(t)) / max(1, len(t)) for f, t in zip(found, truth)]))


def run_size(n: int, dim: int, work: Path, nq: int, slow_q: int, min_sim: float, extra: int) -> dict:
    spec = SynthSpec(n, dim)
    rq = compiled_recall_queries(dim, work)
    store_db = work / f"n{n}d{dim}.duckdb"
    serving = store_db.with_suffix(".serving")
    t = time.perf_counter()
    snap = write_snapshot(spec, serving, rq)
    gen_s = time.perf_counter() - t
    shutil.rmtree(index_dir(snap), ignore_errors=True)  # always timed: a full (first) index build
    t = time.perf_counter()
    build_index(snap)
    index_s = time.perf_counter() - t
    t = time.perf_counter()
    build_term_postings(snap)
    terms_s = time.perf_counter() - t
    qs = queries(spec, nq)
    texts = query_texts(spec, nq)
    np.save(work / "queries.npy", qs)
    (work / "texts.json").write_text(json.dumps(texts))

    def serve(fusion: str, target: Path = snap) -> dict:  # the newest snapshot of the folder is served
        use_fusion(target, fusion)
        args = [str(work / "texts.json")] if fusion != "vector" else []
        proc = subprocess.run([sys.executable, "-m", "benchmarks.recall_speed.serve", str(store_db),
                               str(work / "queries.npy"), BIG_USER, str(TOP_K), str(min_sim), *args],
                              cwd=ROOT, capture_output=True, text=True, check=True)
        return json.loads(proc.stdout.strip().splitlines()[-1])

    print(f"[n={n} d={dim}] snapshot {gen_s:.0f}s, index {index_s:.0f}s; shipped path (vector fusion)...", flush=True)
    shipped = serve("vector")
    print(f"[n={n} d={dim}] shipped path (weighted hybrid fusion)...", flush=True)
    shipped_h = serve("weighted")

    con = connect_snapshot(snap)
    ids, x, s = big_user_matrix(spec, con)
    truth = [exact_truth(ids, x, s, q, min_sim) for q in qs]
    print(f"[n={n} d={dim}] numpy exact...", flush=True)
    np_times, np_ids = timed(lambda q: numpy_exact(ids, x, s, q, min_sim), list(qs))
    print(f"[n={n} d={dim}] hybrid: exact truth, numpy exact...", flush=True)
    hyb = Hybrid(con, snap, ids, x, s)
    h_truth = [hyb.truth(q, t, min_sim) for q, t in zip(qs, texts)]
    hn_times, hn_ids = timed(lambda i: hyb.numpy_exact(qs[i], texts[i], min_sim), list(range(nq)))
    del x, hyb.x
    print(f"[n={n} d={dim}] duckdb compiled statement...", flush=True)
    sql = con.execute("select sql_text from recall_queries_vector where query_name = 'recall'").fetchall()[0][0]
    slow = list(range(slow_q))
    db_times, db_rows = timed(lambda i: con.execute(sql, [BIG_USER, [qs[i].tolist()], TOP_K, min_sim, None, [None], None, None]).fetchall(), slow)
    db_ids = [[r[2] for r in rows] for rows in db_rows]
    hd_times, hd_rows = timed(lambda i: con.execute(hyb.recall_sql, [BIG_USER, [qs[i].tolist()], TOP_K, min_sim, None,
                                                                     [texts[i]], None, None]).fetchall(), slow)
    hd_ids = [[r[2] for r in rows] for rows in hd_rows]
    con.close()
    print(f"[n={n} d={dim}] reference recall...", flush=True)
    ref = reference_table(spec, snap, work / f"ref-n{n}d{dim}.duckdb")
    ref_times, ref_out = timed(lambda i: reference_recall(ref, dim, qs[i].tolist(), TOP_K, min_sim), slow)
    rcon = duckdb.connect(str(ref), read_only=True)
    wanted = {c for out in ref_out for c in out}
    content_to_id = dict(rcon.execute("select content, memory_id from long_term_memory where content in (select unnest(?))",
                                      [sorted(wanted)]).fetchall())
    rcon.close()
    ref_ids = [[content_to_id[c] for c in out] for out in ref_out]

    incremental = None
    if extra:
        print(f"[n={n} d={dim}] incremental index update (+{extra:,} memories)...", flush=True)
        after = write_snapshot(SynthSpec(n, dim, extra=extra), serving, rq)
        shutil.rmtree(index_dir(after), ignore_errors=True)
        incremental = build_index(after, index_dir(snap))
        # recall from the updated index: the big user's reused IVF plus its tail (the new memories)
        build_term_postings(after)
        print(f"[n={n} d={dim}] shipped path on the updated index (tail of {incremental['tail_rows']:,} rows)...",
              flush=True)
        tail_v, tail_h = serve("vector", after), serve("weighted", after)
        acon = duckdb.connect(str(after), read_only=True)
        a_ids, a_x, a_s = big_user_matrix(SynthSpec(n, dim, extra=extra), acon)
        a_truth = [exact_truth(a_ids, a_x, a_s, q, min_sim) for q in qs]
        a_hyb = Hybrid(acon, after, a_ids, a_x, a_s)
        a_h_truth = [a_hyb.truth(q, t, min_sim) for q, t in zip(qs, texts)]
        del a_x, a_hyb.x
        acon.close()
        incremental["with_tail"] = {
            name: {"p50_ms": pct(r["times"][1:], 50), "p99_ms": pct(r["times"][1:], 99),
                   "recall_at_10": recall_at_k(r["ids"], t), "peak_rss_mb": r["peak_rss_mb"]}
            for name, r, t in (("vector", tail_v, a_truth), ("weighted", tail_h, a_h_truth))}
        shutil.rmtree(index_dir(after), ignore_errors=True)
        after.unlink()
        after.with_suffix(".ready").unlink()
    rows = {
        "reference recall": (ref_times, recall_at_k(ref_ids, truth[:slow_q])),
        "duckdb compiled statement": (db_times, recall_at_k(db_ids, truth[:slow_q])),
        "numpy exact": (np_times, recall_at_k(np_ids, truth)),
        "shipped (index)": (shipped["times"][1:], recall_at_k(shipped["ids"], truth)),
    }
    hybrid_rows = {
        "reference recall (vector-only, as above)": (ref_times, float("nan")),
        "duckdb compiled statement (weighted)": (hd_times, recall_at_k(hd_ids, h_truth[:slow_q])),
        "numpy exact hybrid": (hn_times, recall_at_k(hn_ids, h_truth)),
        "shipped hybrid (index + term postings)": (shipped_h["times"][1:], recall_at_k(shipped_h["ids"], h_truth)),
    }
    return {"n": n, "dim": dim, "queries": nq, "slow_queries": slow_q, "min_sim": min_sim, "snapshot_s": gen_s,
            "index_build_s": index_s, "term_postings_s": terms_s, "incremental": incremental, "shipped_indexed": shipped["indexed"], "shipped_peak_rss_mb": shipped["peak_rss_mb"],
            "shipped_open_s": shipped["open_and_first_s"],
            "index_mb": sum(f.stat().st_size for f in index_dir(snap).iterdir()) / 2**20,
            "rows": {k: {"p50_ms": pct(t, 50), "p99_ms": pct(t, 99), "recall_at_10": r, "n": len(t)}
                     for k, (t, r) in rows.items()},
            "hybrid": {"shipped_indexed": shipped_h["indexed"] and shipped_h["hybrid"],
                       "shipped_peak_rss_mb": shipped_h["peak_rss_mb"], "shipped_open_s": shipped_h["open_and_first_s"],
                       "rows": {k: {"p50_ms": pct(t, 50), "p99_ms": pct(t, 99), "recall_at_10": r, "n": len(t)}
                                for k, (t, r) in hybrid_rows.items()}}}


def table(result: dict) -> str:
    ship = result["rows"]["shipped (index)"]["p50_ms"]
    lines = [f"### {result['n']:,} memories x {result['dim']}-d (top-{TOP_K}, min_sim {result['min_sim']}, "
             f"big user holds 99%)", "",
             "| method | p50 ms | p99 ms | recall@10 vs exact | shipped speed-up (p50) | queries |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, r in result["rows"].items():
        ratio = "1x" if name.startswith("shipped") else f"{r['p50_ms'] / ship:,.0f}x"
        lines.append(f"| {name} | {r['p50_ms']:,.2f} | {r['p99_ms']:,.2f} | {r['recall_at_10']:.4f} | {ratio} | {r['n']} |")
    lines += ["", f"shipped serving process peak RSS: {result['shipped_peak_rss_mb']:,.0f} MB "
              f"(index on disk {result['index_mb']:,.0f} MB; open + first recall {result['shipped_open_s']:.1f} s); "
              f"index build from the snapshot: {result['index_build_s']:.0f} s, "
              f"term postings {result.get('term_postings_s', 0):.0f} s"]
    h = result.get("hybrid")
    if h:
        ship_h = h["rows"]["shipped hybrid (index + term postings)"]["p50_ms"]
        lines += ["", f"#### shipped default fusion: weighted hybrid (vector + BM25; served from the index: "
                  f"{h['shipped_indexed']})", "",
                  "| method | p50 ms | p99 ms | recall@10 vs exact hybrid | shipped hybrid speed-up (p50) | queries |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name, r in h["rows"].items():
            ratio = "1x" if name.startswith("shipped") else f"{r['p50_ms'] / ship_h:,.0f}x"
            rec = "-" if r["recall_at_10"] != r["recall_at_10"] else f"{r['recall_at_10']:.4f}"
            lines.append(f"| {name} | {r['p50_ms']:,.2f} | {r['p99_ms']:,.2f} | {rec} | {ratio} | {r['n']} |")
        lines += ["", f"shipped hybrid serving process peak RSS: {h['shipped_peak_rss_mb']:,.0f} MB "
                  f"(open + first recall {h['shipped_open_s']:.1f} s)"]
    inc = result.get("incremental")
    if inc:
        lines.append(f"incremental index update after +{inc['appended_rows']:,} new/changed memories: "
                     f"{inc['seconds']:.1f} s, of which {inc['read_snapshot_seconds']:.1f} s reading the snapshot "
                     f"(light columns of every row + the new rows); IVF reused as is: {inc['linked_ivf']}, "
                     f"tail {inc['tail_rows']:,} rows, retrained: {inc['trained']}")
        for name, r in inc.get("with_tail", {}).items():
            lines.append(f"  recall from the updated index ({name} fusion, with the tail): p50 {r['p50_ms']:.2f} ms, "
                         f"p99 {r['p99_ms']:.2f} ms, recall@10 {r['recall_at_10']:.4f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.recall_speed", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000", help="comma-separated store sizes (memories)")
    ap.add_argument("--dim", type=int, default=384, help="embedding dimension (384, or 1536 for LLM-sized vectors)")
    ap.add_argument("--queries", type=int, default=200, help="queries for numpy and the shipped path")
    ap.add_argument("--slow-queries", type=int, default=10, help="queries for the reference and DuckDB baselines")
    ap.add_argument("--min-sim", type=float, default=0.5, help="raw-cosine threshold")
    ap.add_argument("--quick", action="store_true", help="50k memories, 50 queries, 5 slow ones (a smoke run)")
    ap.add_argument("--workdir", default=str(ROOT / "benchmarks" / "recall_speed" / "out"))
    ap.add_argument("--incremental", type=int, default=0,
                    help="also time the index update after this many new memories (e.g. 10000)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--target", choices=["duckdb", "postgres"], default="duckdb",
                    help="postgres: the same store in PostgreSQL + pgvector (benchmarks/recall_speed/pg.py)")
    ap.add_argument("--pg-ef-search", default="",
                    help="postgres: also measure the shipped path with these var recall_index_ef_search values "
                         "(comma-separated, e.g. 0,200), same store and queries")
    ap.add_argument("--pg-hnsw", default="",
                    help="postgres: the benchmark's HNSW index built with these parameters, e.g. "
                         "m=16,ef_construction=128 (default: the model's, vars recall_index_hnsw_m and "
                         "recall_index_hnsw_ef_construction of dbt_project.yml)")
    a = ap.parse_args(argv)
    if a.quick:
        a.sizes, a.queries, a.slow_queries = "50000", 50, 5
    work = Path(a.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    if a.target == "postgres":
        from . import pg

        tries = [int(x) for x in a.pg_ef_search.split(",") if x.strip()]
        results = [pg.run_size(int(n), a.dim, work, a.queries, a.slow_queries, a.min_sim, tries, a.pg_hnsw)
                   for n in a.sizes.split(",")]
        render = pg.table
    else:
        results = [run_size(int(n), a.dim, work, a.queries, a.slow_queries, a.min_sim, a.incremental)
                   for n in a.sizes.split(",")]
        render = table
    print()
    for r in results:
        print(render(r))
        print()
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
