"""Synthetic serving snapshots for the recall benchmark.

A snapshot is what ``dbt build`` publishes: a DuckDB file with ``long_term_memory`` (current rows)
and ``recall_queries`` (the compiled recall statement). The statement comes from a real
``dbt run --select recall_queries`` with the requested ``embedding_dim``; the memories are
generated here, because embedding a million texts with the real model takes hours.

Vectors are clustered like sentence embeddings: every cluster centre shares a common direction
(e5-style anisotropy, so unrelated memories still have cosine ~0.4) and members scatter around
their centre (cosine ~0.8 between members). Queries are perturbed cluster centres, so each has a
neighbourhood of genuinely similar memories, and strength (uniform 0.3-1.0) reorders them.

Text, for the hybrid fusion's lexical leg: every memory has 6-14 words, two of them topic words of
its cluster (``t<cluster>x<j>``, three per cluster) and the rest drawn from a 50,000-word
background vocabulary (``w<rank>``) with Zipf-like frequencies (p ~ 1 / (rank + 2.7)^1.07, so the
commonest words are in ~5% of memories, like real text after stopwords). The snapshot carries the
term index the dbt models would produce from that text (``memory_term_index``: one row per
(memory, term) with tf and doc_len; ``memory_term_stats``: df, n_docs, avg_doc_len per (user,
term), the same SQL as the model), sorted by (user_id, term) like the models. The words are plain
lower-case letters+digits, so the ``tokenize`` macro yields exactly them. A query's text is two of
its cluster's topic words, two Zipf-drawn background words and stopwords.
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
# every memory has a turn: sessions of this many consecutive memories (the turn context and the
# conversation lift work over them, as in a real store)
SESSION_TURNS = 24
VOCAB = 50_000
TOPIC_WORDS = 3
FUSIONS = ("vector", "weighted")  # recall_queries_<fusion> tables of every synthetic snapshot


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


def _zipf_p() -> np.ndarray:
    p = 1.0 / (np.arange(VOCAB) + 2.7) ** 1.07
    return p / p.sum()


def query_texts(spec: SynthSpec, count: int) -> list[str]:
    """The text of each of ``queries(spec, count)``: topic words of its cluster + common words."""
    rng = np.random.default_rng([spec.seed, 999])
    rng.standard_normal((count, spec.dim))  # the same draws as queries(), for the same clusters
    labels = rng.integers(0, spec.clusters, count)
    words = np.random.default_rng([spec.seed, 998]).choice(VOCAB, (count, 2), p=_zipf_p())
    topic = np.random.default_rng([spec.seed, 997]).integers(0, TOPIC_WORDS, (count, 2))
    return [f"what about t{c}x{a} and t{c}x{b} with w{u} w{v}"
            for c, (a, b), (u, v) in zip(labels.tolist(), topic.tolist(), words.tolist())]


def texts(spec: SynthSpec, start: int, labels: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Rows [start, start + len(labels)): (content, then the term index as (row, term code, tf)
    arrays). Term codes: background word r is r, topic word j of cluster c is VOCAB + 3c + j."""
    m = len(labels)
    rng = np.random.default_rng([spec.seed, start, 3])
    n_bg = rng.integers(4, 13, m)
    bg = rng.choice(VOCAB, int(n_bg.sum()), p=_zipf_p())
    topic = VOCAB + TOPIC_WORDS * labels[:, None] + rng.integers(0, TOPIC_WORDS, (m, 2))
    row = np.concatenate([np.repeat(np.arange(m), n_bg), np.repeat(np.arange(m), 2)])
    term = np.concatenate([bg, topic.reshape(-1)])
    order = np.argsort(row, kind="stable")
    row, term = row[order], term[order]
    names = np.array(term_names(spec), dtype=object)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=m))])
    words = names[term]
    content = [" ".join(words[bounds[i] : bounds[i + 1]]) for i in range(m)]
    key, tf = np.unique(row.astype(np.int64) * (VOCAB + TOPIC_WORDS * spec.clusters) + term, return_counts=True)
    return content, key // (VOCAB + TOPIC_WORDS * spec.clusters), key % (VOCAB + TOPIC_WORDS * spec.clusters), tf


def term_names(spec: SynthSpec) -> list[str]:
    return [f"w{i}" for i in range(VOCAB)] + [f"t{i // TOPIC_WORDS}x{i % TOPIC_WORDS}" for i in range(TOPIC_WORDS * spec.clusters)]


def owners(spec: SynthSpec, start: int, stop: int) -> list[str]:
    rng = np.random.default_rng([spec.seed, start, 1])
    small = rng.random(stop - start) > spec.big_user_share
    who = rng.integers(0, spec.small_users, stop - start)
    return [f"user{w:03d}" if s else BIG_USER for s, w in zip(small, who)]


def compiled_recall_queries(dim: int, workdir: Path) -> Path:
    """A warehouse holding the real compiled ``recall_queries`` rows for ``dim`` (dbt run): as
    ``recall_queries_vector`` the vector-only fusion with strength_weight 1.0 (the reference
    design's strength x cosine, so the vector baselines rank by the same score), as
    ``recall_queries_weighted`` the shipped defaults (hybrid weighted fusion)."""
    db = workdir / f"rq{dim}.duckdb"
    if db.exists():
        return db
    for fusion in FUSIONS:
        _dbt_recall_queries(dim, workdir, fusion)
    return db


def _dbt_recall_queries(dim: int, workdir: Path, fusion: str) -> None:
    db = workdir / f"rq{dim}.duckdb"
    extra = {"fusion_method": "vector", "strength_weight": 1.0} if fusion == "vector" else {}
    env = dict(os.environ, AGENT_MEMORY_DB=str(db), DBT_TARGET_PATH=str(workdir / "target"),
               DBT_LOG_PATH=str(workdir / "logs"), DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    dbt = Path(sys.executable).with_name("dbt")
    subprocess.run([str(dbt) if dbt.exists() else "dbt", "run", "--select", "recall_queries recall_index_settings",
                    "--project-dir",
                    str(ROOT), "--profiles-dir", str(ROOT), "--vars",
                    # the index serves the vector-only fusion; strength_weight 1.0 is the reference
                    # design's strength x cosine, so every method below ranks by the same score
                    json.dumps({"embedding_dim": dim, **extra})],
                   cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    con = duckdb.connect(str(db))
    con.execute(f"create or replace table recall_queries_{fusion} as select * from recall_queries")
    con.close()


def use_fusion(snapshot: Path, fusion: str) -> None:
    """Make ``fusion``'s compiled statements the snapshot's ``recall_queries`` (what serving reads)."""
    con = duckdb.connect(str(snapshot))
    con.execute(f"create or replace table recall_queries as select * from recall_queries_{fusion}")
    con.close()


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
    for fusion in FUSIONS:
        con.execute(f"create table recall_queries_{fusion} as select * from rq.main.recall_queries_{fusion}")
    con.execute("create table recall_queries as select * from recall_queries_vector")
    con.execute("create table recall_index_settings as select * from rq.main.recall_index_settings")
    con.execute("detach rq")
    con.execute(f"""create table long_term_memory (
        memory_id varchar, user_id varchar, kind varchar, slot varchar, content varchar,
        embedding float[{spec.dim}], created_at timestamp, last_accessed timestamp, access_count bigint,
        strength double, mention_count bigint, source_message_ids varchar[], valid_from timestamp,
        valid_to timestamp, strength_as_of timestamp, embedding_model varchar, is_question boolean,
        agent_ids varchar[], session_ids varchar[], happened_on date, happened_grain varchar,
        turn_session_id varchar, turn_seq bigint)""")
    con.execute("""create table term_rows (memory_id varchar, user_id varchar, term varchar, tf bigint,
        doc_len bigint)""")
    vocabulary = term_names(spec)
    names = pa.table({"term_code": pa.array(np.arange(len(vocabulary))), "term": pa.array(vocabulary)})
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
        content, t_row, t_term, t_tf = texts(spec, start, labels)
        table = table.append_column("content", pa.array(content))
        doc_len = np.bincount(t_row, weights=t_tf, minlength=stop - start).astype(np.int64)
        terms = pa.table({"i": pa.array(start + t_row), "term_code": pa.array(t_term), "tf": pa.array(t_tf),
                          "doc_len": pa.array(doc_len[t_row])})
        con.register("chunk", table)
        con.register("chunk_terms", terms)
        con.register("names", names)
        con.execute("""insert into term_rows select 'mem_' || md5('synthetic|' || t.i), c.user_id,
            n.term, t.tf, t.doc_len
            from chunk_terms as t
            inner join chunk as c using (i)
            inner join names as n using (term_code)""")
        con.unregister("chunk_terms")
        con.execute("""insert into long_term_memory select
            'mem_' || md5('synthetic|' || i), user_id, kind, null,
            content, embedding,
            timestamp '2026-01-01', null, 0, strength, 1, ['msg_' || i], timestamp '2026-01-01', null,
            timestamp '2026-06-01', 'synthetic', false, [], [], null, null,
            'sess_' || (i // {TURNS}), i % {TURNS} from chunk""".replace("{TURNS}", str(SESSION_TURNS)))
        con.unregister("chunk")
    # the term index as the dbt models lay it out (memory_term_index.sql, memory_term_stats.sql)
    con.execute("""create table memory_term_index as select memory_id || ':' || term as term_entry_id,
        memory_id, user_id, term, tf, doc_len from term_rows order by user_id, term""")
    con.execute("drop table term_rows")
    con.execute("""create table memory_term_stats as
        with docs as (
            select user_id, count(distinct memory_id) as n_docs, avg(doc_len) as avg_doc_len
            from (select distinct user_id, memory_id, doc_len from memory_term_index) group by user_id),
        dfs as (select user_id, term, count(*) as df from memory_term_index group by user_id, term)
        select dfs.user_id || ':' || dfs.term as term_stat_id, dfs.user_id, dfs.term, dfs.df, docs.n_docs,
            docs.avg_doc_len
        from dfs inner join docs using (user_id) order by dfs.user_id, dfs.term""")
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
