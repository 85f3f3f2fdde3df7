"""Synthetic serving snapshots for the recall benchmark.

A snapshot is what ``dbt build`` publishes: a DuckDB file with ``long_term_memory`` (current rows)
and ``recall_queries`` (the compiled recall statement). The statement comes from a real
``dbt run --select recall_queries`` with the requested ``embedding_dim``; the memories are
generated here, because embedding a million texts with the real model takes hours.

Vectors are clustered like sentence embeddings: every cluster centre shares a common direction
(e5-style anisotropy, so unrelated memories still have cosine ~0.4) and members scatter around
their centre (cosine ~0.8 between members). Queries are perturbed cluster centres, so each has a
neighbourhood of genuinely similar memories, and strength (uniform 0.3-1.0) reorders them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("preference", "fact", "skill")
KIND_P = (0.3, 0.5, 0.2)
BIG_USER = "bench"
CHUNK = 100_000


@dataclass(frozen=True)
class SynthSpec:
    n: int
    dim: int = 384
    big_user_share: float = 0.99  # the rest is spread over small users
    small_users: int = 100
    seed: int = 7
    extra: int = 0  # memories added after the first n (an incremental build's new memories)

    @property
    def clusters(self) -> int:
        return max(16, self.n // 100)


def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def centres(spec: SynthSpec) -> np.ndarray:
    rng = np.random.default_rng(spec.seed)
    mu = _unit(rng.standard_normal((1, spec.dim)).astype(np.float32))
    g = rng.standard_normal((spec.clusters, spec.dim)).astype(np.float32) * (1.2 / np.sqrt(spec.dim))
    return _unit(mu + g)


def vectors(spec: SynthSpec, start: int, stop: int, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows [start, stop): (cluster labels, float32 unit vectors). Deterministic per chunk."""
    rng = np.random.default_rng([spec.seed, start])
    labels = rng.integers(0, len(c), stop - start)
    noise = rng.standard_normal((stop - start, spec.dim)).astype(np.float32) * (0.55 / np.sqrt(spec.dim))
    return labels, _unit(c[labels] + noise)


def queries(spec: SynthSpec, count: int) -> np.ndarray:
    c = centres(spec)
    rng = np.random.default_rng([spec.seed, 999])
    noise = rng.standard_normal((count, spec.dim)).astype(np.float32) * (0.45 / np.sqrt(spec.dim))
    return _unit(c[rng.integers(0, len(c), count)] + noise)


def owners(spec: SynthSpec, start: int, stop: int) -> list[str]:
    rng = np.random.default_rng([spec.seed, start, 1])
    small = rng.random(stop - start) > spec.big_user_share
    who = rng.integers(0, spec.small_users, stop - start)
    return [f"user{w:03d}" if s else BIG_USER for s, w in zip(small, who)]


def compiled_recall_queries(dim: int, workdir: Path) -> Path:
    """A warehouse holding the real compiled ``recall_queries`` row for ``dim`` (dbt run)."""
    db = workdir / f"rq{dim}.duckdb"
    if db.exists():
        return db
    env = dict(os.environ, AGENT_MEMORY_DB=str(db), DBT_TARGET_PATH=str(workdir / "target"),
               DBT_LOG_PATH=str(workdir / "logs"), DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    dbt = Path(sys.executable).with_name("dbt")
    subprocess.run([str(dbt) if dbt.exists() else "dbt", "run", "--select", "recall_queries recall_index_settings",
                    "--project-dir",
                    str(ROOT), "--profiles-dir", str(ROOT), "--vars",
                    # the index serves the vector-only fusion; strength_weight 1.0 is the reference
                    # design's strength x cosine, so every method below ranks by the same score
                    json.dumps({"embedding_dim": dim, "fusion_method": "vector", "strength_weight": 1.0})],
                   cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return db


def write_snapshot(spec: SynthSpec, serving: Path, rq_db: Path) -> Path:
    """Write ``serving/snap-<...>.duckdb`` + ``.ready`` for ``spec``; returns the snapshot path."""
    serving.mkdir(parents=True, exist_ok=True)
    stamp = "20260102" if spec.extra else "20260101"
    path = serving / f"snap-{stamp}T000000000000-n{spec.n}d{spec.dim}x{spec.extra}.duckdb"
    if path.with_suffix(".ready").exists():
        return path
    path.unlink(missing_ok=True)
    c = centres(spec)
    con = duckdb.connect(str(path))
    con.execute(f"attach '{rq_db}' as rq (read_only)")
    con.execute("create table recall_queries as select * from rq.main.recall_queries")
    con.execute("create table recall_index_settings as select * from rq.main.recall_index_settings")
    con.execute("detach rq")
    con.execute(f"""create table long_term_memory (
        memory_id varchar, user_id varchar, kind varchar, slot varchar, content varchar,
        embedding float[{spec.dim}], created_at timestamp, last_accessed timestamp, access_count bigint,
        strength double, mention_count bigint, source_message_ids varchar[], valid_from timestamp,
        valid_to timestamp, strength_as_of timestamp, embedding_model varchar, is_question boolean,
        agent_ids varchar[], session_ids varchar[])""")
    total = spec.n + spec.extra
    for start in range(0, total, CHUNK):
        stop = min(total, start + CHUNK)
        labels, x = vectors(spec, start, stop, c)
        rng = np.random.default_rng([spec.seed, start, 2])
        ids = np.arange(start, stop)
        table = pa.table({
            "i": pa.array(ids),
            "user_id": pa.array(owners(spec, start, stop)),
            "kind": pa.array(np.array(KINDS)[rng.choice(len(KINDS), stop - start, p=KIND_P)]),
            "label": pa.array(labels),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), spec.dim),
            "strength": pa.array(rng.uniform(0.3, 1.0, stop - start)),
        })
        con.register("chunk", table)
        con.execute("""insert into long_term_memory select
            'mem_' || md5('synthetic|' || i), user_id, kind, null,
            'synthetic memory ' || i || ' about topic ' || label, embedding,
            timestamp '2026-01-01', null, 0, strength, 1, ['msg_' || i], timestamp '2026-01-01', null,
            timestamp '2026-06-01', 'synthetic', false, [], [] from chunk""")
        con.unregister("chunk")
    con.execute("checkpoint")
    con.close()
    path.with_suffix(".ready").write_text("synthetic\n")
    return path


def reference_table(spec: SynthSpec, snapshot: Path, out: Path) -> Path:
    """The reference design's layout (DOUBLE[dim] embeddings, no user column) for its recall()."""
    if out.exists():
        return out
    tmp = Path(tempfile.mkdtemp(dir=out.parent)) / out.name
    con = duckdb.connect(str(tmp))
    con.execute(f"attach '{snapshot}' as s (read_only)")
    con.execute(f"""create table long_term_memory as select memory_id, kind, content,
        embedding::double[{spec.dim}] as embedding, created_at, last_accessed, access_count::integer as access_count,
        strength from s.main.long_term_memory where user_id = '{BIG_USER}'""")
    con.execute("detach s")
    con.close()
    os.rename(tmp, out)
    tmp.parent.rmdir()
    return out
