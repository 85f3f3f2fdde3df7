"""Reading a snapshot into a serving index folder (recall_shim/serving/index.py): the per-row light
arrays of every row, and the heavy rows (vector, payload; recall_shim/serving/index_heavy.py) of only the
rows the previous index does not hold unchanged.

A full read (first build, compaction) converts every current memory's vector and payload out of
the snapshot (DuckDB ``FLOAT[dim]`` lists to arrow to numpy: ~13 s at 1M memories) into a fresh
heavy generation, rows in (user_id, id64) order, so every user's heavy rows are contiguous. An
incremental read takes only the *light* columns of every row (ids, kind, strength, a fingerprint)
and the vectors and payloads of the new and changed rows, appended to the previous folder's heavy
files (hard links): a reused row keeps its heavy row (``vrow``), nothing of it is copied.

A row is reused when the previous index has the same id64 (the memory_id's hash) with the same
fingerprint: ``hash(content, source_message_ids, embedding_model, dates)``, since the vector is a
function of (model, kind's form, content), the kind is part of the memory_id and the payload holds
the content, sources and dates. Strength, kind
and the question flag are always read fresh (strength decays every build).

What stays O(store) here: the light columns of every row (~40 bytes per row, numpy and DuckDB
columnar work, no vectors).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from recall_shim.serving.index_heavy import HEAVY_FILES, HeavyPrefix, HeavyWriter, published_prefix
from recall_shim.serving.lookup import positions_unsorted
from recall_shim.common.sql import sql_literal

# rows are reused only while the fresh ones stay below this share (else a full read is as cheap)
MAX_FRESH_SHARE = 0.5


# the heavy row's payload: JSON [content, source_message_ids, said_at, happened_on, happened_grain]
# (the dates as ISO text or null; recall_shim/serving/index.py payload_of reads it)
PAYLOAD_SQL = ("json_array(content, coalesce(source_message_ids, []::varchar[]), strftime(created_at, '%Y-%m-%dT%H:%M:%S'),"
               " strftime(happened_on, '%Y-%m-%d'), happened_grain)::varchar as payload")


def fingerprint_expr(con: duckdb.DuckDBPyConnection) -> str:
    """SQL of the per-row fingerprint over the snapshot's long_term_memory: what the heavy row
    holds (the vector's inputs and the payload's columns)."""
    cols = {r[0] for r in con.execute(
        "select column_name from duckdb_columns() where table_name = 'long_term_memory'").fetchall()}
    model = "embedding_model" if "embedding_model" in cols else "''"
    return (f"hash(content, coalesce(source_message_ids, []::varchar[]), {model}, embedding is null, created_at,"
            " happened_on, happened_grain)::ubigint")


def _string_buffers(arr: Any) -> tuple[np.ndarray, memoryview]:
    """(offsets relative to the first value, value bytes) of an arrow string array, no copies."""
    wide = str(arr.type) in ("large_string", "large_utf8")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if wide else np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = memoryview(arr.buffers()[2] or b"")[int(offsets[0]) : int(offsets[-1])]
    return offsets.astype(np.int64) - int(offsets[0]), data


def _embeddings(emb: Any, dim: int) -> np.ndarray:
    """An arrow list column of embeddings as a float32 (m, dim) block; NULL becomes a zero vector
    (which never ranks)."""
    m = len(emb)
    flat = np.asarray(emb.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
    if not emb.null_count:
        return flat.reshape(m, dim)
    valid = ~np.asarray(emb.is_null().to_numpy(zero_copy_only=False))
    block = np.zeros((m, dim), dtype=np.float32)
    block[valid] = flat.reshape(m, dim)[valid] if len(flat) == m * dim else flat.reshape(-1, dim)
    return block


def _norms64(block: np.ndarray) -> np.ndarray:
    x = block.astype(np.float64)
    out = np.sqrt(np.einsum("ij,ij->i", x, x))
    out[~np.isfinite(out)] = 0.0
    return out


def _snapshot_shape(con: duckdb.DuckDBPyConnection, current: str) -> tuple[list, list, str, str]:
    users = con.execute(f"select user_id, count(*) {current} group by user_id order by user_id").fetchall()
    kinds = [r[0] for r in con.execute(f"select distinct kind {current} and kind is not null order by kind").fetchall()]
    kind_list = "[" + ", ".join(sql_literal(k) for k in kinds) + "]::varchar[]"
    slots = [r[0] for r in con.execute(f"select distinct slot {current} and slot is not null order by slot").fetchall()]
    slot_list = "[" + ", ".join(sql_literal(k) for k in slots) + "]::varchar[]"
    has_question = bool(con.execute(
        "select count(*) from duckdb_columns() where table_name = 'long_term_memory' and column_name = 'is_question'"
    ).fetchall()[0][0])
    # the slot's code: its position in `slots`, len(slots) for none (SnapshotIndex.slots)
    light = ("select (md5_number_upper(memory_id) >> 2)::bigint as id64,"
             f" coalesce(list_position({kind_list}, kind) - 1, {len(kinds)})::smallint as kind_code, strength,"
             f" memory_id, {'coalesce(is_question, false)' if has_question else 'false'} as is_question,"
             f" {fingerprint_expr(con)} as fp,"
             f" coalesce(list_position({slot_list}, slot) - 1, {len(slots)})::smallint as slot_code,"
             " epoch(created_at)::double as said_epoch")
    return users, (kinds, slots), light, kind_list


def _float64(col: Any) -> np.ndarray:
    """A DOUBLE column as float64, NULL as NaN."""
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)


def _user_blocks(users: list) -> dict[str, Any]:
    counts = np.array([c for _, c in users], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return {"users": [u for u, _ in users], "starts": starts, "stops": starts + counts}


def read_snapshot_full(con: duckdb.DuckDBPyConnection, out: Path, dim: int, current: str) -> dict[str, Any]:
    """Every current memory into a fresh heavy generation in ``out``, sorted by (user, id64):
    vrow = arange (each user's heavy rows contiguous). Columnar all the way, no per-row Python."""
    users, (kinds, slots), light, _ = _snapshot_shape(con, current)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("id64", "kind", "strength", "memory_id", "question", "fp", "slot",
                                                          "said", "norm")}
    reader = con.sql(
        f"{light}, embedding, {PAYLOAD_SQL}"
        f" {current} order by user_id, id64").to_arrow_reader(50_000)
    heavy = HeavyWriter(out, dim)
    try:
        for batch in reader:
            for name, col in (("id64", 0), ("kind", 1), ("strength", 2)):
                cols[name].append(batch.column(col).to_numpy(zero_copy_only=False))
            cols["memory_id"].append(batch.column(3).to_numpy(zero_copy_only=False).astype(bytes))
            cols["question"].append(batch.column(4).to_numpy(zero_copy_only=False).astype(bool))
            cols["fp"].append(batch.column(5).to_numpy(zero_copy_only=False).astype(np.uint64))
            cols["slot"].append(batch.column(6).to_numpy(zero_copy_only=False))
            cols["said"].append(_float64(batch.column(7)))
            block = _embeddings(batch.column(8), dim)
            cols["norm"].append(_norms64(block))
            rel, data = _string_buffers(batch.column(9))
            heavy.append(block, data, rel[1:])
        prefix = heavy.prefix()
    finally:
        heavy.close()
    joined = {k: np.concatenate(v) for k, v in cols.items()}
    n = len(joined["id64"])
    return {"n": n, "kinds": kinds, "slots": slots, **_user_blocks(users), **joined, "vrow": np.arange(n, dtype=np.int64),
            "heavy": prefix, "reused": 0, "fresh": n, "changed_ids": np.zeros(0, dtype=np.int64), "compacted": True}


def _previous(folder: Path, meta: dict[str, Any]) -> dict[str, Any] | None:
    needed = ("id64", "fp", "norm", "vrow")
    if "heavy" not in meta or not all((folder / f"{n}.npy").exists() for n in needed):
        return None
    if not all((folder / name).exists() for name in HEAVY_FILES):
        return None
    return {k: np.load(folder / f"{k}.npy") for k in needed}


def read_snapshot_reusing(con: duckdb.DuckDBPyConnection, out: Path, dim: int, current: str,
                          previous: Path, prev_meta: dict[str, Any], compact_share: float) -> dict[str, Any] | None:
    """Like ``read_snapshot_full`` (same keys), appending only new and changed rows to the previous
    folder's heavy files. None when ``previous`` cannot be reused (no fingerprints), too much
    changed, or the dead heavy rows would pass ``compact_share``: the caller then compacts (reads
    everything into a fresh generation)."""
    prev = _previous(previous, prev_meta)
    if prev is None:
        return None
    users, (kinds, slots), light_sql, _ = _snapshot_shape(con, current)
    light = con.sql(f"{light_sql} {current} order by user_id, id64").to_arrow_table()
    n = light.num_rows
    id64 = light.column(0).to_numpy().astype(np.int64)
    fp = light.column(5).to_numpy().astype(np.uint64)

    # match every row to the previous index by id64 (memory_ids are unique across users)
    at = positions_unsorted(prev["id64"], id64)
    same_id = at >= 0
    same = same_id & (prev["fp"][np.maximum(at, 0)] == fp) if len(prev["fp"]) else same_id
    src = np.where(same, at, -1).astype(np.int64)
    changed_ids = id64[same_id & ~same]
    fresh = np.flatnonzero(src < 0)
    if n and len(fresh) > MAX_FRESH_SHARE * n:
        return None
    start = published_prefix(previous.parent, HeavyPrefix.of(prev_meta))
    total = start.rows + len(fresh)
    dead = total - n  # heavy rows no row of this snapshot reads (gone, changed, torn-off)
    if total and dead > compact_share * total:
        return None

    # the fresh rows' vectors and payloads, in the same (user_id, id64) order, appended
    vrow = np.full(n, -1, dtype=np.int64)
    norm = np.zeros(n, dtype=np.float64)
    reuse = src >= 0
    vrow[reuse] = prev["vrow"][src[reuse]]
    norm[reuse] = prev["norm"][src[reuse]]
    heavy = HeavyWriter(out, dim, link_from=previous, start=start)
    try:
        if len(fresh):
            import pyarrow as pa

            # filter by memory_id first: the hash and the payload JSON only for the fresh rows
            con.register("_index_fresh_ids", pa.table({"memory_id": light.column(3).take(pa.array(fresh))}))
            try:
                got = con.sql(
                    f"select (md5_number_upper(memory_id) >> 2)::bigint as id64, embedding, {PAYLOAD_SQL}"
                    f" from (select * {current} and memory_id in (select memory_id from _index_fresh_ids))"
                    " order by user_id, id64").to_arrow_table()
            finally:
                con.unregister("_index_fresh_ids")
            if got.num_rows != len(fresh) or not np.array_equal(got.column(0).to_numpy(), id64[fresh]):
                return None  # ids collided or the order differs: read everything instead
            block = _embeddings(got.column(1).combine_chunks(), dim)
            rel, data = _string_buffers(got.column(2).combine_chunks())
            vrow[fresh] = heavy.append(block, data, rel[1:])
            norm[fresh] = _norms64(block)
        prefix = heavy.prefix()
    finally:
        heavy.close()
    return {"n": n, "kinds": kinds, "slots": slots, **_user_blocks(users), "id64": id64,
            "kind": light.column(1).to_numpy(zero_copy_only=False),
            "slot": light.column(6).to_numpy(zero_copy_only=False),
            "said": _float64(light.column(7)),
            "strength": light.column(2).to_numpy(zero_copy_only=False),
            "memory_id": light.column(3).to_numpy(zero_copy_only=False).astype(bytes),
            "question": light.column(4).to_numpy(zero_copy_only=False).astype(bool),
            "fp": fp, "norm": norm, "vrow": vrow, "heavy": prefix, "reused": int(reuse.sum()), "fresh": len(fresh),
            "changed_ids": changed_ids, "compacted": False}
