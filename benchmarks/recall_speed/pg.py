"""``--target postgres`` of the recall benchmark (docs/scaling_out.md).

The same synthetic store as the DuckDB run (synth.py: the same memory ids, vectors, strengths and
queries) is loaded into ``long_term_memory`` of a PostgreSQL 16 + pgvector server started from the
pgserver wheel, with the indexes the project's post-hook builds (``user_id`` btree and HNSW). The
compiled statement comes from a real ``dbt run --target postgres --select recall_queries``. Rows:

  reference recall          the reference design's recall() as written (DuckDB; the baseline)
  postgres compiled stmt    the compiled recall statement on an open psycopg connection
  numpy exact               as in the DuckDB run
  shipped (PgMemoryStore)   PgMemoryStore.recall_many with a precomputed vector, in its own
                            process (its peak RSS, and the PostgreSQL backend's, are reported);
                            a small user's calls after the first come from the per-user cache
  shipped without the       the first NO_CACHE_QUERIES of the same calls, same process, cache off
  per-user cache            (the exact scan of the user's rows, or HNSW for a big user)

    python -m benchmarks.recall_speed --target postgres --sizes 100000
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import duckdb
import numpy as np
import yaml

from recall_shim.serving.snapshot import connect_snapshot

from .synth import BIG_USER, CHUNK, ROOT, SynthSpec, compiled_recall_queries, queries, reference_table, write_snapshot

SCHEMA = "bench"
NO_CACHE_QUERIES = 60  # shipped calls measured again with the per-user cache off
_COLUMNS = ("memory_id text, user_id text, kind varchar, slot text, content text, embedding vector({dim}),"
            " created_at timestamp, last_accessed timestamp, access_count bigint, strength double precision,"
            " mention_count integer, source_message_ids text[], valid_from timestamp, valid_to timestamp,"
            " strength_as_of timestamp, embedding_form text, is_question boolean, embedding_model text,"
            " session_ids text[], agent_ids text[], happened_on date, happened_grain text, turn_session_id text,"
            " turn_seq bigint")


def _dbt_compiled(conn: Any, dim: int, work: Path, extra_vars: dict | None = None) -> None:
    """recall_queries (and recall_index_settings) built by dbt on the postgres target."""
    env = dict(os.environ, **conn.dbt_env(), DBT_TARGET_PATH=str(work / "pg-target"),
               DBT_LOG_PATH=str(work / "pg-logs"), DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    dbt = Path(sys.executable).with_name("dbt")
    subprocess.run([str(dbt) if dbt.exists() else "dbt", "run", "--target", "postgres", "--select",
                    "recall_queries recall_index_settings", "--project-dir", str(ROOT), "--profiles-dir", str(ROOT),
                    "--vars", json.dumps({"embedding_dim": dim, "fusion_method": "vector", "strength_weight": 1.0,
                                         **(extra_vars or {})})],
                   cwd=ROOT, env=env, check=True, capture_output=True, text=True)


def shipped_hnsw() -> str:
    """The model's HNSW parameters (vars recall_index_hnsw_m / _ef_construction of dbt_project.yml),
    as 'm=16,ef_construction=96'."""
    v = yaml.safe_load((ROOT / "dbt_project.yml").read_text())["vars"]
    return f"m={int(v['recall_index_hnsw_m'])},ef_construction={int(v['recall_index_hnsw_ef_construction'])}"


def _load(conn: Any, spec: SynthSpec, snap: Path, hnsw_with: str = "") -> tuple[float, float]:
    """Copy the snapshot's long_term_memory into PostgreSQL; returns (load s, index build s). The
    HNSW index is built with ``hnsw_with`` ('m=N,ef_construction=N'; default: the model's)."""
    src = connect_snapshot(snap)
    started = time.perf_counter()
    with conn.connect() as con:
        con.execute(f"drop table if exists {SCHEMA}.long_term_memory")
        # fillfactor 50, as the model creates it (docs/scaling_out.md, "Incremental builds")
        con.execute(f"create table {SCHEMA}.long_term_memory ({_COLUMNS.format(dim=spec.dim)}) with (fillfactor = 50)")
        fmt = "[" + ",".join(["%.7g"] * spec.dim) + "]"
        rel = src.sql("select memory_id, user_id, kind, content, strength, embedding from long_term_memory")
        with con.cursor() as cur, cur.copy(
                f"copy {SCHEMA}.long_term_memory (memory_id, user_id, kind, content, strength, embedding,"
                " created_at, access_count, mention_count, source_message_ids, valid_from, strength_as_of,"
                " embedding_form, is_question, embedding_model, session_ids, agent_ids) from stdin") as copy:
            for batch in rel.to_arrow_reader(CHUNK):
                cols = [batch.column(i).to_pylist() for i in range(5)]
                emb = batch.column(5).flatten().to_numpy().reshape(batch.num_rows, spec.dim)
                for i in range(batch.num_rows):
                    copy.write_row((cols[0][i], cols[1][i], cols[2][i], cols[3][i], cols[4][i],
                                    fmt % tuple(emb[i].tolist()), "2026-01-01", 0, 1,
                                    "{msg_" + cols[0][i][4:] + "}", "2026-01-01", "2026-06-01", "query", False,
                                    "synthetic", "{}", "{}"))
        con.commit()
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        con.execute("set maintenance_work_mem = '4GB'")
        con.execute(f"create index on {SCHEMA}.long_term_memory (user_id)")
        con.execute(f"create index on {SCHEMA}.long_term_memory using hnsw"
                    f" ((embedding::vector({spec.dim})) vector_cosine_ops)"
                    f" with ({_hnsw_params(hnsw_with or shipped_hnsw())})")
        con.commit()
        indexed = time.perf_counter() - started
    with conn.connect(autocommit=True) as con:
        con.execute(f"vacuum analyze {SCHEMA}.long_term_memory")
    src.close()
    return loaded, indexed


def _hnsw_params(text: str) -> str:
    """'m=24,ef_construction=128' -> the index's storage parameters (integers of pgvector's two only)."""
    out = []
    for part in text.split(","):
        key, _, value = part.partition("=")
        if key.strip() not in ("m", "ef_construction") or not value.strip().isdigit():
            raise ValueError(f"--pg-hnsw takes m=N,ef_construction=N, not {text!r}")
        out.append(f"{key.strip()} = {int(value)}")
    return ", ".join(out)


def _vec(q: np.ndarray) -> str:
    return "{\"[" + ",".join(repr(float(x)) for x in q) + "]\"}"


def _shipped(conn: Any, work: Path, min_sim: float) -> dict:
    from .__main__ import TOP_K

    proc = subprocess.run([sys.executable, "-m", "benchmarks.recall_speed.pg", json.dumps(conn.__dict__),
                           str(work / "queries.npy"), BIG_USER, str(TOP_K), str(min_sim), str(work)],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-4000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_size(n: int, dim: int, work: Path, nq: int, slow_q: int, min_sim: float,
             ef_tries: Sequence[int] = (), hnsw_with: str = "") -> dict:
    from recall_shim import LocalPostgres

    from .__main__ import (TOP_K, big_user_matrix, exact_truth, numpy_exact, pct, recall_at_k, reference_recall,
                           timed)

    spec = SynthSpec(n, dim)
    hnsw_with = hnsw_with or shipped_hnsw()
    rq = compiled_recall_queries(dim, work)
    t = time.perf_counter()
    snap = write_snapshot(spec, work / f"n{n}d{dim}.serving", rq)
    gen_s = time.perf_counter() - t
    qs = queries(spec, nq)
    np.save(work / "queries.npy", qs)
    pgdata = work / "pg-data"
    shutil.rmtree(pgdata, ignore_errors=True)
    server = LocalPostgres(pgdata, schema=SCHEMA)
    conn = server.start()
    try:
        _dbt_compiled(conn, dim, work)
        print(f"[postgres n={n} d={dim}] loading the store...", flush=True)
        load_s, index_s = _load(conn, spec, snap, hnsw_with)
        print(f"[postgres n={n} d={dim}] load {load_s:.0f}s, indexes {index_s:.0f}s; shipped path...", flush=True)
        shipped = _shipped(conn, work, min_sim)
        with conn.connect() as con:
            shipped_ef = int(con.execute(f"select ef_search from {SCHEMA}.recall_index_settings").fetchone()[0])
        tries = {}
        for ef in ef_tries:  # other var recall_index_ef_search values, same store and queries
            print(f"[postgres n={n} d={dim}] shipped path with recall_index_ef_search {ef}...", flush=True)
            with conn.connect() as con:
                con.execute(f"update {SCHEMA}.recall_index_settings set ef_search = %s", [ef])
                con.commit()
            tries[ef] = _shipped(conn, work, min_sim)
        with conn.connect() as con:
            con.execute(f"update {SCHEMA}.recall_index_settings set ef_search = %s", [shipped_ef])
            con.commit()
        print(f"[postgres n={n} d={dim}] compiled statement...", flush=True)
        import psycopg

        with psycopg.connect(host=conn.host, port=conn.port, user=conn.user, dbname=conn.dbname,
                             cursor_factory=psycopg.RawCursor) as con:
            sql = con.execute(f"select sql_text from {SCHEMA}.recall_queries where query_name = 'recall'").fetchone()[0]
            slow = list(range(slow_q))
            pg_times, pg_rows = timed(lambda i: con.execute(sql, [BIG_USER, _vec(qs[i]), TOP_K, min_sim, None,
                                                                  "{NULL}", None, None]).fetchall(), slow)
        pg_ids = [[r[2] for r in rows] for rows in pg_rows]
        size_mb = _relation_mb(conn)
    finally:
        server.stop()
    con2 = connect_snapshot(snap)
    ids, x, s = big_user_matrix(spec, con2)
    con2.close()
    truth = [exact_truth(ids, x, s, q, min_sim) for q in qs]
    print(f"[postgres n={n} d={dim}] numpy exact, reference recall...", flush=True)
    np_times, np_ids = timed(lambda q: numpy_exact(ids, x, s, q, min_sim), list(qs))
    del x
    ref = reference_table(spec, snap, work / f"ref-n{n}d{dim}.duckdb")
    ref_times, ref_out = timed(lambda i: reference_recall(ref, dim, qs[i].tolist(), TOP_K, min_sim), list(range(slow_q)))
    rcon = duckdb.connect(str(ref), read_only=True)
    wanted = sorted({c for out in ref_out for c in out})
    content_to_id = dict(rcon.execute("select content, memory_id from long_term_memory where content in (select unnest(?))",
                                      [wanted]).fetchall())
    rcon.close()
    ref_ids = [[content_to_id[c] for c in out] for out in ref_out]
    rows = {
        "reference recall": (ref_times, recall_at_k(ref_ids, truth[:slow_q])),
        "postgres compiled statement": (pg_times, recall_at_k(pg_ids, truth[:slow_q])),
        "numpy exact": (np_times, recall_at_k(np_ids, truth)),
        "shipped (PgMemoryStore)": (shipped["times"][1:], recall_at_k(shipped["ids"], truth)),
        "shipped without the per-user cache": (shipped["nocache_times"],
                                               recall_at_k(shipped["nocache_ids"], truth[:len(shipped["nocache_ids"])])),
        **{f"shipped, recall_index_ef_search {ef}": (t["times"][1:], recall_at_k(t["ids"], truth))
           for ef, t in tries.items()},
    }
    return {"target": "postgres", "n": n, "dim": dim, "queries": nq, "slow_queries": slow_q, "min_sim": min_sim,
            "ef_search": shipped_ef, "hnsw_with": hnsw_with,
            "ef_tries": {ef: {"indexed": t["indexed"], "fallbacks": t["fallbacks"]} for ef, t in tries.items()},
            "snapshot_s": gen_s, "load_s": load_s, "index_build_s": index_s, "table_mb": size_mb,
            "shipped_peak_rss_mb": shipped["peak_rss_mb"], "backend_peak_rss_mb": shipped["backend_peak_rss_mb"],
            "shipped_open_s": shipped["open_and_first_s"], "shipped_indexed_calls": shipped["indexed"],
            "shipped_fallbacks": shipped["fallbacks"], "shipped_exact_scans": shipped["exact"],
            "shipped_cache": shipped["cache"],
            "rows": {k: {"p50_ms": pct(t, 50), "p99_ms": pct(t, 99), "recall_at_10": r, "n": len(t)}
                     for k, (t, r) in rows.items()}}


def _relation_mb(conn: Any) -> float:
    with conn.connect() as con:
        return float(con.execute(f"select pg_total_relation_size('{SCHEMA}.long_term_memory')").fetchone()[0]) / 2**20


def table(result: dict) -> str:
    ship = result["rows"]["shipped (PgMemoryStore)"]["p50_ms"]
    lines = [f"### postgres: {result['n']:,} memories x {result['dim']}-d (top-10, min_sim {result['min_sim']}, "
             f"big user holds 99%; recall_index_ef_search {result.get('ef_search', 0)}; HNSW "
             f"{result.get('hnsw_with', 'pgvector defaults (m=16,ef_construction=64)')})", "",
             "| method | p50 ms | p99 ms | recall@10 vs exact | shipped speed-up (p50) | queries |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, r in result["rows"].items():
        ratio = "1x" if name == "shipped (PgMemoryStore)" else f"{r['p50_ms'] / ship:,.2f}x"
        lines.append(f"| {name} | {r['p50_ms']:,.2f} | {r['p99_ms']:,.2f} | {r['recall_at_10']:.4f} | {ratio} | {r['n']} |")
    lines += ["", f"shipped client process peak RSS: {result['shipped_peak_rss_mb']:,.0f} MB; its PostgreSQL "
              f"backend's peak RSS: {result['backend_peak_rss_mb']:,.0f} MB (shared buffers counted as touched); "
              f"table + indexes {result['table_mb']:,.0f} MB; load {result['load_s']:.0f} s, "
              f"user_id + HNSW index build {result['index_build_s']:.0f} s; shipped calls answered from the HNSW "
              f"index: {result['shipped_indexed_calls']}, by the exact scan of the user's rows (at most "
              f"recall_index_min_rows memories): {result.get('shipped_exact_scans', 0)} (fell back to the statement: "
              f"{result['shipped_fallbacks']}); per-user cache of the shipped calls (user_cache.py): "
              f"{result.get('shipped_cache', {})}"]
    return "\n".join(lines)


def _serve(conn_json: str, queries_path: str, user: str, top_k: str, min_sim: str, work: str) -> None:
    """The shipped path alone in this process: PgMemoryStore.recall_many, one query at a time."""
    from recall_shim import PgConnection, PgMemoryStore

    from .serve import rss_mb

    qs = np.load(queries_path)
    conn = PgConnection(**json.loads(conn_json))
    started = time.perf_counter()
    store = PgMemoryStore(conn, work_dir=Path(work) / "pg-work")
    store.recall_many([qs[0]], user_id=user, top_k=int(top_k), min_sim=float(min_sim), record_access=False)
    open_s = time.perf_counter() - started
    times, ids, backends = [], [], set()
    for q in qs:
        t = time.perf_counter()
        hits = store.recall_many([q], user_id=user, top_k=int(top_k), min_sim=float(min_sim), record_access=False)[0]
        times.append(time.perf_counter() - t)
        ids.append([h.memory_id for h in hits])
    cache = {"hits": store._ann.cache.hits, "loads": store._ann.cache.loads}
    # the same calls without the per-user cache (user_cache.py): the exact scan, or HNSW for a big user
    store._ann.cache.max_rows = 0
    nocache_times, nocache_ids = [], []
    for q in qs[:NO_CACHE_QUERIES]:
        t = time.perf_counter()
        hits = store.recall_many([q], user_id=user, top_k=int(top_k), min_sim=float(min_sim), record_access=False)[0]
        nocache_times.append(time.perf_counter() - t)
        nocache_ids.append([h.memory_id for h in hits])
    # one new connection per call: the backends are gone; measure one more backend doing one recall
    with conn.connect() as con:
        pid = con.execute("select pg_backend_pid()").fetchone()[0]
        sql = store._reader.settings.sql_text
        import psycopg

        with psycopg.RawCursor(con) as cur:
            cur.execute(sql, [user, _vec(qs[0]), int(top_k), float(min_sim), None, "{NULL}", None, None]).fetchall()
        backend_hwm = _proc_hwm(pid)
    print(json.dumps({"indexed": store._ann.used, "exact": store._ann.exact, "fallbacks": store._ann.fallbacks,
                      "open_and_first_s": open_s, "times": times, "ids": ids, "peak_rss_mb": rss_mb("VmHWM"),
                      "backend_peak_rss_mb": backend_hwm, "cache": cache, "nocache_times": nocache_times,
                      "nocache_ids": nocache_ids}))


def _proc_hwm(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


if __name__ == "__main__":
    _serve(*sys.argv[1:])
