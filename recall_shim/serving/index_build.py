"""Writing a snapshot's serving index (the layout is described in recall_shim/serving/index.py,
which reads it): the light per-row arrays, the heavy rows appended to the generation's files, and
a faiss IVF per big user, into ``snap-X.index.tmp-PID/``, fsynced, then renamed into place."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from recall_shim.common.durable import fsync_files
from recall_shim.serving.context import TurnLinks
from recall_shim.serving.index import FORMAT, IndexSettings, index_dir, load_meta
from recall_shim.serving.index_heavy import HeavyPrefix, HeavyReader
from recall_shim.serving.index_ivf import build_user_ivf, load_faiss
from recall_shim.serving.index_reuse import read_snapshot_full, read_snapshot_reusing
from recall_shim.serving.lookup import positions_unsorted
from recall_shim.serving.snapshot import connect_snapshot
from recall_shim.serving.window import TurnWindows

__all__ = ["build_index"]

CURRENT = "from long_term_memory where valid_to is null and user_id is not null"


def _turn_links(con: Any, id64: np.ndarray) -> TurnLinks:
    """The snapshot's turn-context links (published statement turn_links) as index rows; none for a
    snapshot published without the statement or with the turn context off."""
    found = con.execute("select sql_text from recall_queries where query_name = 'turn_links'").fetchall()
    if not found:
        return TurnLinks.empty()
    pairs = con.execute(found[0][0]).fetchnumpy()
    # a pair with a memory the index does not hold (-1) is dropped by TurnLinks.of
    return TurnLinks.of(positions_unsorted(id64, pairs["neighbour_id64"]), positions_unsorted(id64, pairs["id64"]),
                        np.asarray(pairs["weight"], dtype=np.float64))


def _turn_windows(con: Any, id64: np.ndarray) -> TurnWindows:
    """The rows near each other in a conversation (recall_shim/serving/window.py) when the
    snapshot's recall has the conversation lift; none otherwise (or for a snapshot without it)."""
    try:
        found = con.execute("select lift_numpy, conversation_lift_turns from recall_queries"
                            " where query_name = 'recall'").fetchall()
    except duckdb.Error:  # published before the lift
        return TurnWindows.empty(len(id64))
    if not found or not (found[0][0] or "").strip():
        return TurnWindows.empty(len(id64))
    try:
        got = con.execute("select (md5_number_upper(memory_id) >> 2)::bigint as id64, user_id, turn_session_id,"
                          f" turn_seq::bigint as turn_seq {CURRENT} and turn_session_id is not null"
                          " and turn_seq is not null").fetchnumpy()
    except duckdb.BinderException:  # memories without turns: none is near another
        return TurnWindows.empty(len(id64))
    rows = positions_unsorted(id64, got["id64"])
    keep = rows >= 0
    # one group per (user, session): session ids repeat across users
    pairs = np.char.add(np.char.add(np.asarray(got["user_id"], dtype=str), "\x1f"),
                        np.asarray(got["turn_session_id"], dtype=str))
    group = np.unique(pairs, return_inverse=True)[1].reshape(-1)
    return TurnWindows.build(len(id64), rows[keep], group[keep], np.asarray(got["turn_seq"])[keep], int(found[0][1]))


def build_index(snapshot: Path, previous: Path | None = None) -> dict[str, Any]:
    """Write ``snap-X.index/`` for ``snapshot``, appending to ``previous``'s heavy files (an older
    index folder) and reusing its big users' IVFs where it can. Returns what it did (for logs and
    benchmarks)."""
    faiss = load_faiss()
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    started = time.monotonic()
    final = index_dir(snapshot)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    con = connect_snapshot(snapshot)
    try:
        settings = IndexSettings.from_snapshot(con)
        dim = int(con.execute("select embedding_dim from recall_queries where query_name = 'recall'").fetchall()[0][0])
        if not con.execute(f"select count(*) {CURRENT}").fetchall()[0][0]:
            shutil.rmtree(tmp)
            return {"rows": 0, "seconds": round(time.monotonic() - started, 3)}
        prev_meta = load_meta(previous) if previous is not None else None
        reusable = (prev_meta is not None and previous is not None and prev_meta.get("dim") == dim
                    and prev_meta.get("format") == FORMAT)
        data = None
        if reusable:
            assert previous is not None and prev_meta is not None
            data = read_snapshot_reusing(con, tmp, dim, CURRENT, previous, prev_meta, settings.compact_share)
        if data is None:  # first build, compaction, other dimension: a fresh heavy generation
            data = read_snapshot_full(con, tmp, dim, CURRENT)
        links = _turn_links(con, data["id64"])
        windows = _turn_windows(con, data["id64"])
    finally:
        con.close()
    read_s = time.monotonic() - started
    order = sorted(range(len(data["users"])), key=lambda i: data["users"][i].encode())  # for searchsorted
    users = [data["users"][i] for i in order]
    user_start, user_stop = data["starts"][order], data["stops"][order]
    np.save(tmp / "users.npy", np.array([u.encode() for u in users], dtype=bytes))
    np.save(tmp / "user_start.npy", np.stack([user_start, user_stop], axis=1))
    np.save(tmp / "id64.npy", data["id64"].astype(np.int64))
    np.save(tmp / "memory_id.npy", data["memory_id"])
    np.save(tmp / "kind.npy", data["kind"].astype(np.int16))
    np.save(tmp / "slot.npy", data["slot"].astype(np.int16))
    np.save(tmp / "said.npy", data["said"].astype(np.float64))
    np.save(tmp / "strength.npy", data["strength"].astype(np.float64))
    np.save(tmp / "question.npy", data["question"].astype(bool))
    np.save(tmp / "fp.npy", data["fp"].astype(np.uint64))
    np.save(tmp / "norm.npy", data["norm"])
    np.save(tmp / "vrow.npy", data["vrow"])
    links.save(tmp)
    windows.save(tmp)
    light_s = time.monotonic() - started - read_s

    prefix: HeavyPrefix = data["heavy"]
    heavy = HeavyReader(tmp, dim, prefix)
    norm, vrow = data["norm"], data["vrow"]

    def unit_rows(rows: np.ndarray) -> np.ndarray:
        x = np.concatenate([heavy.rows(vrow[rows[a : a + 65_536]], mapped=False)
                            for a in range(0, len(rows), 65_536)]) if len(rows) else np.zeros((0, dim), np.float32)
        return x / norm[rows, None].astype(np.float32)

    big: dict[str, dict[str, Any]] = {}
    stats = {"rows": int(data["n"]), "users": len(users), "indexed_users": 0, "added": 0, "removed": 0, "trained": 0,
             "reused_rows": int(data["reused"]), "appended_rows": int(data["fresh"]),
             "compacted": bool(data["compacted"]), "heavy_rows": prefix.rows, "linked_ivf": 0, "tail_rows": 0,
             "turn_links": len(links), "turn_window_rows": len(windows.order)}
    try:
        for user, lo, hi in zip(users, user_start.tolist(), user_stop.tolist()):
            if hi - lo <= settings.min_rows:
                continue
            old = prev_meta["ivf"].get(str(user)) if reusable and prev_meta is not None else None
            big[str(user)] = build_user_ivf(tmp, len(big), lo, hi, data, unit_rows, settings, dim,
                                            previous if reusable else None, old, stats)
            stats["indexed_users"] += 1
    finally:
        heavy.close()
    meta = {"format": FORMAT, "dim": dim, "snapshot": snapshot.name, "kinds": data["kinds"], "slots": data["slots"],
            "settings": asdict(settings), "heavy": prefix.as_meta(), "ivf": big, "stats": stats}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    fsync_files(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    stats["seconds"] = round(time.monotonic() - started, 3)
    stats["read_snapshot_seconds"] = round(read_s, 3)  # light columns + new rows (all rows when compacting)
    stats["light_arrays_seconds"] = round(light_s, 3)  # O(store) but small: the per-row arrays
    return stats


