"""Incremental read of a snapshot into a serving index folder (recall_shim/_index.py).

A full index build reads every current memory's vector and payload out of the snapshot (DuckDB
``FLOAT[dim]`` lists to arrow to numpy: the dominant cost, ~13 s at 1M memories). An incremental
build reads only the *light* columns of every row (ids, kind, strength, a fingerprint) and the
vectors and payloads of the rows the previous index does not hold unchanged; every other row's
vector, norm and payload bytes are copied from the previous index's files (sequential memory
copies of contiguous runs, no DuckDB conversion).

A row is reused when the previous index has the same id64 (the memory_id's hash) with the same
fingerprint: ``hash(content, source_message_ids, embedding_model)``, since the vector is a
function of (model, kind's form, content) and the kind is part of the memory_id. Strength, kind
and the question flag are always read fresh (strength decays every build).

What stays O(store) here: the light columns of every row (~16 bytes + ids per row) and the
copies of the reused rows' vectors and payloads into the new folder (page-cache memcpy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np

# rows are reused only while the fresh ones stay below this share (else a full read is as cheap)
MAX_FRESH_SHARE = 0.5


def fingerprint_expr(con: duckdb.DuckDBPyConnection) -> str:
    """SQL of the per-row fingerprint over the snapshot's long_term_memory."""
    cols = {r[0] for r in con.execute(
        "select column_name from duckdb_columns() where table_name = 'long_term_memory'").fetchall()}
    model = "embedding_model" if "embedding_model" in cols else "''"
    return f"hash(content, coalesce(source_message_ids, []::varchar[]), {model}, embedding is null)::ubigint"


def _previous(folder: Path, dim: int) -> dict[str, Any] | None:
    needed = ("id64", "fp", "norm", "vectors", "payload")
    if not all((folder / f"{n}.npy").exists() for n in needed) or not (folder / "payload.bin").exists():
        return None
    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        return None
    off = np.load(folder / "payload.npy")
    payload = np.memmap(folder / "payload.bin", dtype=np.uint8, mode="r") if off[-1] else np.zeros(0, np.uint8)
    return {"id64": np.load(folder / "id64.npy"), "fp": np.load(folder / "fp.npy"), "norm": np.load(folder / "norm.npy"),
            "vectors": vectors, "payload_off": off, "payload": payload}


def read_snapshot_reusing(con: duckdb.DuckDBPyConnection, out: Path, dim: int, current: str,
                          previous: Path) -> dict[str, Any] | None:
    """Like ``_index._read_snapshot`` (same return keys plus ``norm``, ``fp``, ``reused`` and
    ``changed_ids``), reusing ``previous``'s rows. None when ``previous`` cannot be reused (no
    fingerprints, other dimension) or too much changed: the caller then reads everything."""
    prev = _previous(previous, dim)
    if prev is None:
        return None
    users = con.execute(f"select user_id, count(*) {current} group by user_id order by user_id").fetchall()
    kinds = [r[0] for r in con.execute(f"select distinct kind {current} and kind is not null order by kind").fetchall()]
    kind_list = "[" + ", ".join("'" + k.replace("'", "''") + "'" for k in kinds) + "]::varchar[]"
    has_question = bool(con.execute(
        "select count(*) from duckdb_columns() where table_name = 'long_term_memory' and column_name = 'is_question'"
    ).fetchall()[0][0])
    question_expr = "coalesce(is_question, false)" if has_question else "false"
    light = con.sql(
        "select (md5_number_upper(memory_id) >> 2)::bigint as id64,"
        f" coalesce(list_position({kind_list}, kind) - 1, {len(kinds)})::smallint as kind_code, strength,"
        f" memory_id, {question_expr} as is_question, {fingerprint_expr(con)} as fp"
        f" {current} order by user_id, id64").to_arrow_table()
    n = light.num_rows
    id64 = light.column(0).to_numpy().astype(np.int64)
    fp = light.column(5).to_numpy().astype(np.uint64)

    # match every row to the previous index by id64 (memory_ids are unique across users)
    p_order = np.argsort(prev["id64"], kind="stable")
    p_sorted = prev["id64"][p_order]
    pos = np.clip(np.searchsorted(p_sorted, id64), 0, max(len(p_sorted) - 1, 0))
    src = np.full(n, -1, dtype=np.int64)
    if len(p_sorted):
        same_id = p_sorted[pos] == id64
        cand = p_order[pos]
        same = same_id & (prev["fp"][cand] == fp)
        src[same] = cand[same]
        changed_ids = id64[same_id & ~same]
    else:
        changed_ids = np.zeros(0, dtype=np.int64)
    fresh = np.flatnonzero(src < 0)
    if n and len(fresh) > MAX_FRESH_SHARE * n:
        return None

    # the fresh rows' vectors and payloads, in the same (user_id, id64) order
    vec = np.lib.format.open_memmap(out / "vectors.npy", mode="w+", dtype=np.float32, shape=(n, dim))
    fresh_vec = np.zeros((len(fresh), dim), dtype=np.float32)
    fresh_payload: list[bytes] = []
    if len(fresh):
        import pyarrow as pa

        con.register("_index_fresh_ids", pa.table({"id64": pa.array(id64[fresh], type=pa.int64())}))
        try:
            got = con.sql(
                "select id64, embedding, payload from (select (md5_number_upper(memory_id) >> 2)::bigint as id64,"
                " user_id, embedding,"
                " json_array(content, coalesce(source_message_ids, []::varchar[]))::varchar as payload"
                f" {current}) as m semi join _index_fresh_ids as f using (id64) order by user_id, id64").to_arrow_table()
        finally:
            con.unregister("_index_fresh_ids")
        if got.num_rows != len(fresh) or not np.array_equal(got.column(0).to_numpy(), id64[fresh]):
            return None  # ids collided or the order differs: read everything instead
        emb = got.column(1)
        for i, v in enumerate(emb.to_pylist()):  # few rows: the new and changed memories
            if v is not None:
                fresh_vec[i] = np.asarray(v, dtype=np.float32)
        fresh_payload = [s.encode("utf-8") for s in got.column(2).to_pylist()]

    # contiguous runs of reused rows that were contiguous before: one slice copy each
    reuse = src >= 0
    brk = np.ones(n, dtype=bool)
    if n > 1:
        brk[1:] = ~(reuse[1:] & reuse[:-1] & (src[1:] == src[:-1] + 1))
    starts = np.flatnonzero(brk)
    stops = np.append(starts[1:], n)
    p_off = prev["payload_off"]
    lengths = np.zeros(n, dtype=np.int64)
    lengths[reuse] = p_off[src[reuse] + 1] - p_off[src[reuse]]
    lengths[fresh] = [len(b) for b in fresh_payload]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    norm = np.zeros(n, dtype=np.float64)
    fresh_f64 = fresh_vec.astype(np.float64)
    fresh_norm = np.sqrt(np.einsum("ij,ij->i", fresh_f64, fresh_f64))  # as _index._norms
    fresh_norm[~np.isfinite(fresh_norm)] = 0.0
    fresh_at = {int(r): i for i, r in enumerate(fresh)}
    with open(out / "payload.bin", "wb") as payload:
        for a, b in zip(starts.tolist(), stops.tolist()):
            if reuse[a]:
                s = int(src[a])
                vec[a:b] = prev["vectors"][s : s + b - a]
                norm[a:b] = prev["norm"][s : s + b - a]
                payload.write(memoryview(prev["payload"][p_off[s] : p_off[s + b - a]]))
            else:  # a fresh row (runs of fresh rows are single rows)
                i = fresh_at[a]
                vec[a] = fresh_vec[i]
                norm[a] = fresh_norm[i]
                payload.write(fresh_payload[i])
    vec.flush()
    np.save(out / "payload.npy", offsets)
    counts = np.array([c for _, c in users], dtype=np.int64)
    ustarts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return {"n": n, "vectors": vec, "users": [u for u, _ in users], "starts": ustarts, "stops": ustarts + counts,
            "kinds": kinds, "id64": id64, "kind": light.column(1).to_numpy(zero_copy_only=False),
            "strength": light.column(2).to_numpy(zero_copy_only=False),
            "memory_id": light.column(3).to_numpy(zero_copy_only=False).astype(bytes),
            "question": light.column(4).to_numpy(zero_copy_only=False).astype(bool),
            "norm": norm, "fp": fp, "reused": int(reuse.sum()), "changed_ids": changed_ids}
