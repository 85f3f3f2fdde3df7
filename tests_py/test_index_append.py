"""The serving index's incremental build is O(new): append-only heavy files shared by hard link
between consecutive index folders (recall_shim/serving/index_heavy.py), a big user's IVF reused as is
with a tail of new and changed rows (recall_shim/serving/index_ivf.py). After a sequence of incremental
builds the answers equal a fresh full build and the compiled statement; the heavy files grow by
exactly the new and changed rows; a torn tail is cut off and never read; past the dead share the
heavy files are compacted into a fresh generation. (Forget: tests_py/test_forget.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from recall_shim import MemoryStore
from recall_shim.serving.index import SnapshotIndex, index_dir
from recall_shim.serving.index_build import build_index
from recall_shim.serving.index_heavy import PAYLOAD, PAYLOAD_END, VECTORS

from .test_index import DIM, check_all, synthetic_rows, template, vector_store, write_snapshot  # noqa: F401

# tiny settings force an IVF user on small data; every list probed: the answers must be exact
SETTINGS = {"min_rows": 1000, "lists_per_sqrt": 1.0, "nprobe": 10_000}


def changed(rows: dict[str, list], extra: dict[str, list], drop: list[int], edit: list[int], add: list[int],
            add_user: str = "big") -> dict[str, list]:
    """``rows`` without the ``drop`` rows, with the ``edit`` rows' content, vector and sources
    replaced (same memory_id), plus ``extra``'s ``add`` rows for ``add_user``; every strength decays."""
    gone = set(drop)
    out = {k: [v for i, v in enumerate(rows[k]) if i not in gone] for k in rows}
    at = {m: i for i, m in enumerate(out["memory_id"])}
    for j, i in enumerate(edit):
        r = at[rows["memory_id"][i]]
        out["content"][r] = f"edited {rows['memory_id'][i]}"
        out["embedding"][r] = list(np.asarray(extra["embedding"][-1 - j], dtype=float))
        out["source_message_ids"][r] = [f"msg_edit_{j}"]
    for k in rows:
        out[k] += [extra[k][i] for i in add]
    out["user_id"][len(out["user_id"]) - len(add):] = [add_user] * len(add)
    out["strength"] = [round(s * 0.95, 4) for s in out["strength"]]
    return out


def meta(snap: Path) -> dict:
    return json.loads((index_dir(snap) / "meta.json").read_text())


def heavy_sizes(folder: Path) -> tuple[int, int, int]:
    return tuple((folder / f).stat().st_size for f in (VECTORS, PAYLOAD, PAYLOAD_END))  # type: ignore[return-value]


def queries_of(rows: dict[str, list], picks: list[int]) -> np.ndarray:
    rng = np.random.default_rng(len(picks))
    base = np.array([rows["embedding"][i] if rows["embedding"][i] is not None else [0.1] * DIM for i in picks],
                    dtype=np.float64)
    return np.vstack([base, base + rng.standard_normal(base.shape) * 0.3])


def same_as_full_build(snap: Path, tmp_path: Path, queries: np.ndarray) -> None:
    """The incremental index answers like a full build of the same snapshot (ids, scores)."""
    full = tmp_path / f"full-{snap.stem}" / snap.name
    full.parent.mkdir()
    shutil.copyfile(snap, full)
    build_index(full)
    a, b = SnapshotIndex(index_dir(snap)), SnapshotIndex(index_dir(full))
    try:
        for user in ("big", "small", "tiny"):
            for kinds in (None, ["fact"]):
                got, want = a.search(user, queries, 20, -1.0, kinds), b.search(user, queries, 20, -1.0, kinds)
                for g, w in zip(got, want):
                    # a tail row's cosine comes from the heavy file, an IVF row's from the IVF's
                    # float32 unit vector: scores closer than 1e-6 may swap
                    assert [h.score for h in g] == pytest.approx([h.score for h in w], abs=1e-6)
                    gaps = [i for i in range(1, len(w)) if w[i - 1].score - w[i].score > 1e-6]
                    for lo, hi in zip([0, *gaps], [*gaps, len(w)]):
                        assert sorted(h.memory_id for h in g[lo:hi]) == sorted(h.memory_id for h in w[lo:hi])
                    assert {h.memory_id: a.payload_of(h.row) for h in g} == {h.memory_id: b.payload_of(h.row) for h in w}
    finally:
        a.close()
        b.close()


def test_incremental_builds_append_and_answer_like_a_full_build(tmp_path: Path, template: Path) -> None:  # noqa: F811
    rows = synthetic_rows(7)
    extra = synthetic_rows(8, n_big=400)
    store = MemoryStore(tmp_path / "store.duckdb")
    serving = store.paths.serving
    s = dict(SETTINGS, tail_share=0.2, compact_share=0.9)
    first = write_snapshot(serving / "snap-20260101T000000000000-app00001.duckdb", rows, template, **s)
    st1 = build_index(first)
    n1 = len(rows["memory_id"])
    assert st1["compacted"] and st1["heavy_rows"] == n1 and st1["trained"] == 1
    assert heavy_sizes(index_dir(first)) == (n1 * DIM * 4, meta(first)["heavy"]["payload_bytes"], n1 * 8)

    # build 2: big loses 20 memories, 10 are edited, 60 new; small gets 5 new
    second_rows = changed(rows, extra, drop=list(range(100, 120)), edit=list(range(200, 210)), add=list(range(60)))
    second_rows = changed(second_rows, extra, drop=[], edit=[], add=list(range(60, 65)), add_user="small")
    second = write_snapshot(serving / "snap-20260102T000000000000-app00002.duckdb", second_rows, template, **s)
    st2 = build_index(second, index_dir(first))
    # the heavy files grew by exactly the new and edited rows, appended to the same inodes
    assert not st2["compacted"] and st2["appended_rows"] == 75 and st2["heavy_rows"] == n1 + 75
    assert st2["reused_rows"] == len(second_rows["memory_id"]) - 75
    assert heavy_sizes(index_dir(second))[0] == (n1 + 75) * DIM * 4
    for f in (VECTORS, PAYLOAD, PAYLOAD_END):
        assert (index_dir(first) / f).stat().st_ino == (index_dir(second) / f).stat().st_ino
    assert meta(first)["heavy"]["rows"] == n1  # the older folder still reads its own prefix only
    # big's IVF is reused as is: the 60 new and 10 edited rows are its tail (3 new rows of
    # synthetic_rows have a zero / NaN / NULL vector and are never indexed)
    assert st2["linked_ivf"] == 1 and st2["trained"] == 0 and st2["added"] == 0 and st2["tail_rows"] == 67
    big = meta(second)["ivf"]["big"]
    assert big["tail_rows"] == 67 and big["dead"] == 30
    assert (index_dir(first) / meta(first)["ivf"]["big"]["file"]).stat().st_ino == (index_dir(second) / big["file"]).stat().st_ino
    at = {m: i for i, m in enumerate(second_rows["memory_id"])}
    picks = [0, 1, at[rows["memory_id"][200]], at[rows["memory_id"][205]], len(second_rows["memory_id"]) - 70,
             len(second_rows["memory_id"]) - 6, len(second_rows["memory_id"]) - 1, 2450]
    queries = queries_of(second_rows, picks)
    assert check_all(store, second, queries) > 500  # the compiled statement (vector fusion)
    same_as_full_build(second, tmp_path, queries)
    # the older index still answers for its own snapshot after the append
    old = SnapshotIndex(index_dir(first))
    assert old.search("big", queries[:1], 5, -1.0, None)[0][0].memory_id == rows["memory_id"][0]
    old.close()

    # build 3: 100 more new memories, and a lower tail_share: tail + dropped (197) pass 5% of the
    # IVF's 2,397 vectors, so the IVF is updated (gone and edited removed, the tail added)
    third_rows = changed(second_rows, extra, drop=[], edit=[], add=list(range(100, 200)))
    third = write_snapshot(serving / "snap-20260103T000000000000-app00003.duckdb", third_rows, template,
                           **dict(s, tail_share=0.05))
    st3 = build_index(third, index_dir(second))
    assert st3["appended_rows"] == 100 and st3["heavy_rows"] == n1 + 175
    assert st3["linked_ivf"] == 0 and st3["trained"] == 0 and st3["tail_rows"] == 0
    assert (st3["added"], st3["removed"]) == (167, 30)
    shutil.rmtree(index_dir(first))
    shutil.rmtree(index_dir(second))
    queries = queries_of(third_rows, [*picks, len(third_rows["memory_id"]) - 1])
    assert check_all(store, third, queries) > 500
    same_as_full_build(third, tmp_path, queries)


def test_torn_tail_is_cut_off_and_never_read(tmp_path: Path, template: Path) -> None:  # noqa: F811
    rows = synthetic_rows(9)
    extra = synthetic_rows(10, n_big=50)
    store = MemoryStore(tmp_path / "store.duckdb")
    s = dict(SETTINGS, tail_share=0.5)
    first = write_snapshot(store.paths.serving / "snap-20260101T000000000000-torn0001.duckdb", rows, template, **s)
    build_index(first)
    sizes = heavy_sizes(index_dir(first))
    # what a builder killed mid-append leaves: bytes past the published prefix, through a hard link
    killed = store.paths.serving / "snap-20260102T000000000000-torn0002.index.tmp-99999"
    killed.mkdir()
    for f in (VECTORS, PAYLOAD, PAYLOAD_END):
        (killed / f).hardlink_to(index_dir(first) / f)
        with open(killed / f, "ab") as fh:
            fh.write(b"TORN" * 1000)
    queries = queries_of(rows, [0, 1, 600, 2401])
    assert check_all(store, first, queries) > 500  # the published index never reads past its prefix
    nxt = changed(rows, extra, drop=[5], edit=[7], add=list(range(40)))
    second = write_snapshot(store.paths.serving / "snap-20260102T000000000000-torn0002.duckdb", nxt, template, **s)
    st = build_index(second, index_dir(first))
    assert st["appended_rows"] == 41 and not st["compacted"]
    got = heavy_sizes(index_dir(second))
    assert got[0] == sizes[0] + 41 * DIM * 4 and got[2] == sizes[2] + 41 * 8
    assert got[1] == meta(second)["heavy"]["payload_bytes"]
    for f in (VECTORS, PAYLOAD, PAYLOAD_END):
        assert b"TORN" not in (index_dir(second) / f).read_bytes()
    assert check_all(store, second, queries_of(nxt, [0, 1, 600, len(nxt["memory_id"]) - 1, len(nxt["memory_id"]) - 20])) > 500


def test_dead_heavy_rows_past_the_share_compact_into_a_fresh_generation(tmp_path: Path, template: Path) -> None:  # noqa: F811
    rows = synthetic_rows(11)
    extra = synthetic_rows(12, n_big=400)
    store = MemoryStore(tmp_path / "store.duckdb")
    s = dict(SETTINGS, compact_share=0.15)
    first = write_snapshot(store.paths.serving / "snap-20260101T000000000000-comp0001.duckdb", rows, template, **s)
    build_index(first)
    n1 = len(rows["memory_id"])
    # 200 edited + 150 removed of 2,905: 350 dead of 3,105 heavy rows (11%) stay below 15%: appended
    second_rows = changed(rows, extra, drop=list(range(400, 550)), edit=list(range(1000, 1200)), add=[])
    second = write_snapshot(store.paths.serving / "snap-20260102T000000000000-comp0002.duckdb", second_rows, template, **s)
    st2 = build_index(second, index_dir(first))
    assert not st2["compacted"] and st2["heavy_rows"] == n1 + 200
    # 150 more edits: 500 dead of 3,255 (15.4%) pass 15%: a fresh generation, every user's heavy
    # rows contiguous again
    third_rows = changed(second_rows, extra, drop=[], edit=list(range(1500, 1650)), add=[])
    third = write_snapshot(store.paths.serving / "snap-20260103T000000000000-comp0003.duckdb", third_rows, template, **s)
    st3 = build_index(third, index_dir(second))
    n3 = len(third_rows["memory_id"])
    assert st3["compacted"] and st3["heavy_rows"] == n3
    assert meta(third)["heavy"]["generation"] != meta(second)["heavy"]["generation"]
    assert np.array_equal(np.load(index_dir(third) / "vrow.npy"), np.arange(n3))
    assert (index_dir(third) / VECTORS).stat().st_ino != (index_dir(second) / VECTORS).stat().st_ino
    assert heavy_sizes(index_dir(second))[0] == (n1 + 200) * DIM * 4  # the older generation is untouched
    at = {m: i for i, m in enumerate(third_rows["memory_id"])}
    queries = queries_of(third_rows, [0, at[rows["memory_id"][1500]], at[rows["memory_id"][1100]], 2401])
    assert check_all(store, third, queries) > 500
