"""A big user's IVF and its *tail* (recall_shim/serving/index.py).

A user with more than ``min_rows`` memories gets a faiss IVF-Flat over its unit vectors (ids =
id64) and ``ivf-<n>.held.npy``: the (id64, fingerprint) of every vector the IVF holds, sorted by
id64. The next build reuses the file as is (hard link) and stores the user's *tail*: its rows with
a vector the IVF does not hold as is (new memories, or the same memory_id with a new fingerprint),
``ivf-<n>.tail.npy`` (snapshot rows, ascending). A request scans the tail exactly and unions it with
the IVF's candidates; an IVF hit whose memory is gone or is in the tail (changed) is dropped. The
widening bounds stay valid: the tail is exact, only IVF rows can be outsiders.

The IVF is updated (gone and changed ids removed, the tail added; O(removed + tail) faiss work but
the whole file is read and written, ~8 s for 1M x 384) once tail + dropped pass ``tail_share`` of
the IVF's vectors, and retrained from scratch once the user grew ``retrain_growth`` times since
training: amortised O(new) per build.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from recall_shim.serving.lookup import in_sorted, positions

EMPTY_ROWS = np.zeros(0, dtype=np.int64)


def load_faiss() -> Any:
    """faiss, imported on first use (loading it costs start-up time a small store never needs)."""
    import faiss

    return faiss


def train_ivf(x: np.ndarray, ids: np.ndarray, lists_per_sqrt: float, dim: int) -> Any:
    faiss = load_faiss()
    nlist = int(max(16, min(65_536, lists_per_sqrt * np.sqrt(len(x)))))
    quantizer = faiss.IndexFlatIP(dim)
    ivf = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(len(x))
    sample = x[np.sort(rng.choice(len(x), min(len(x), nlist * 40), replace=False))]
    ivf.cp.niter = 10
    ivf.train(sample)
    ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # re-ranking reads vectors by id from RAM
    ivf.add_with_ids(x, ids)
    return ivf


def build_user_ivf(tmp: Path, n: int, lo: int, hi: int, data: dict[str, Any], unit_rows: Callable[[np.ndarray], np.ndarray],
                   settings: Any, dim: int, previous: Path | None, old: dict[str, Any] | None,
                   stats: dict[str, int]) -> dict[str, Any]:
    """Write user ``n``'s IVF files for rows [lo, hi) into ``tmp``; returns its meta entry."""
    faiss = load_faiss()
    name, held_name = f"ivf-{n}.faiss", f"ivf-{n}.held.npy"
    ids, fps = data["id64"][lo:hi], data["fp"][lo:hi].view(np.int64)
    ok = data["norm"][lo:hi] > 0  # zero / NaN / NULL vectors are never indexed (they never rank)
    ivf = None
    if (old is not None and previous is not None and "held" in old
            and hi - lo <= old["trained_rows"] * settings.retrain_growth and (previous / old["held"]).exists()):
        held = np.load(previous / old["held"])
        pos = np.clip(np.searchsorted(held[:, 0], ids), 0, max(len(held) - 1, 0))
        as_is = ok & (held[pos, 0] == ids) & (held[pos, 1] == fps) if len(held) else np.zeros(hi - lo, bool)
        tail = np.flatnonzero(ok & ~as_is)
        matched = np.zeros(len(held), dtype=bool)
        matched[pos[as_is]] = True
        dead = int(len(held) - matched.sum())
        if len(tail) + dead <= settings.tail_share * len(held):  # the previous file as is, plus a tail
            os.link(previous / old["file"], tmp / name)
            os.link(previous / old["held"], tmp / held_name)
            entry = {"file": name, "held": held_name, "trained_rows": int(old["trained_rows"]), "nlist": int(old["nlist"]),
                     "ivf_rows": len(held), "tail_rows": len(tail), "dead": dead}
            if len(tail):
                entry["tail"] = f"ivf-{n}.tail.npy"
                np.save(tmp / entry["tail"], (lo + tail).astype(np.int64))
            stats["linked_ivf"] += 1
            stats["tail_rows"] += len(tail)
            return entry
        ivf = faiss.read_index(str(previous / old["file"]))
        gone = np.ascontiguousarray(held[~matched, 0], dtype=np.int64)
        if len(gone):  # O(removed) with the hash-table direct map
            ivf.remove_ids(faiss.IDSelectorArray(len(gone), faiss.swig_ptr(gone)))
        if len(tail):
            ivf.add_with_ids(unit_rows(lo + tail), np.ascontiguousarray(ids[tail]))
        stats["added"] += len(tail)
        stats["removed"] += len(gone)
        trained_rows = int(old["trained_rows"])
    if ivf is None:
        rows = lo + np.flatnonzero(ok)
        ivf = train_ivf(unit_rows(rows), np.ascontiguousarray(ids[ok]), settings.lists_per_sqrt, dim)
        stats["trained"] += 1
        stats["added"] += len(rows)
        trained_rows = len(rows)
    faiss.write_index(ivf, str(tmp / name))
    held = np.stack([ids[ok], fps[ok]], axis=1).astype(np.int64)
    np.save(tmp / held_name, held)
    return {"file": name, "held": held_name, "trained_rows": int(trained_rows), "nlist": int(ivf.nlist),
            "ivf_rows": len(held), "tail_rows": 0, "dead": 0}


def valid_hits(block_ids: np.ndarray, lo: int, found: np.ndarray, tail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Snapshot rows of IVF hits ``found`` (id64s) and which of them are valid: the memory is still
    in the user's block and the IVF holds it as is (not in the tail)."""
    pos = positions(block_ids, found)
    valid = pos >= 0
    rows = lo + np.maximum(pos, 0)
    if len(tail):
        valid &= ~in_sorted(tail, rows)
    return rows, valid
