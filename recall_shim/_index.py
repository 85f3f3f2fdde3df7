"""Indexed recall: a sidecar beside each published snapshot that answers the vector leg of recall
in about a millisecond at a million memories, with the compiled statement's exact semantics.

Layout: ``snap-X.duckdb`` gets ``snap-X.index/`` (written to a temporary folder, then renamed, so a
reader sees a whole index or none). Rows are the snapshot's current memories sorted by
(user_id, id64), so one user's memories are one contiguous block:

    meta.json          format, dim, kinds, settings, per-user IVF files
    users.npy          sorted user ids (bytes); user_start.npy (start, stop) row of each user
    id64.npy           stable 62-bit id per memory (md5 of memory_id), sorted within a user
    memory_id.npy      memory ids (bytes)       kind.npy   kind codes     strength.npy  float64
    question.npy       episode is a question (bool), for var question_episode_weight
    vectors.npy        raw float32 embeddings   norm.npy   float64 L2 norms (0 = never ranks)
    payload.bin/.npy   JSON [content, source_message_ids] per row + offsets
    fp.npy             fingerprint per row (content, sources, model): the next build reuses rows
                       whose (id64, fp) it finds here (recall_shim/_index_reuse.py)
    ivf-<n>.faiss      faiss IVF-Flat over the normalised vectors of one user with many memories

Recall is always for one user. A user with at most ``min_rows`` memories is scanned exactly
(numpy over that block: well under a millisecond). A bigger user's IVF yields candidates by
cosine; they are re-ranked exactly (score = cosine x factor in float64, factor = (1 - w + w x
strength) x question weight as in the compiled statement's vector fusion; threshold on raw cosine,
kind filter, ties by memory_id) and the candidate set is widened (more probes, more candidates)
until no memory outside it could still enter the top k: every score is at most f_max x cosine,
so once the worst retrieved cosine bounds every possible outsider below the k-th score, the
answer is exact up to the IVF's probe recall (measured: benchmarks/recall_speed). Past
``max_share`` of the block it falls back to the exact scan.

Incremental: the builder reuses the previous snapshot's IVF of each big user, removes the ids that
left and adds only the new memories (an unchanged user's file is hard-linked); it retrains when a
user grew ``retrain_growth`` times. Unchanged rows are copied from the previous folder, not read
from the snapshot again.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Sequence

import duckdb
import numpy as np

from ._index_reuse import fingerprint_expr, read_snapshot_reusing
from ._snapshot import connect_snapshot

FORMAT = 1
TIE_MARGIN = 1e-5  # float32 screening error allowance before the float64 re-rank
SCAN_CHUNK = 65_536  # rows per exact-scan step


@dataclass(frozen=True)
class IndexSettings:
    """Tunables (dbt vars ``recall_index_*``, published in the snapshot's recall_index_settings)."""

    min_rows: int = 20_000        # users with more memories than this get an IVF index
    nprobe: int = 12              # IVF lists probed on the first try
    candidates: int = 128         # candidates fetched on the first try (at least 8 x top_k)
    max_share: float = 0.25       # widen up to this share of a user's memories, then scan exactly
    lists_per_sqrt: float = 4.0   # nlist = lists_per_sqrt x sqrt(user rows)
    retrain_growth: float = 2.0   # retrain a user's IVF once it grew this many times

    @classmethod
    def from_snapshot(cls, con: duckdb.DuckDBPyConnection) -> "IndexSettings":
        names = {r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()}
        if "recall_index_settings" not in names:
            return cls()
        row = con.sql("select * from recall_index_settings").to_arrow_table().to_pylist()
        values = row[0] if row else {}
        kw = {f.name: type(getattr(cls(), f.name))(values[f.name]) for f in fields(cls) if values.get(f.name) is not None}
        return cls(**kw)


@dataclass(frozen=True)
class Hit:
    row: int
    memory_id: str
    kind: str | None
    similarity: float
    strength: float
    score: float
    lexical_score: float = 0.0  # BM25 of the query text (hybrid fusions); 0 for the vector fusion


def index_dir(snapshot: Path) -> Path:
    return snapshot.with_suffix(".index")


def _faiss() -> Any:
    import faiss

    return faiss


# --- building -------------------------------------------------------------------------------

CURRENT = "from long_term_memory where valid_to is null and user_id is not null"


def _string_buffers(arr: Any) -> tuple[np.ndarray, memoryview]:
    """(offsets relative to the first value, value bytes) of an arrow string array, no copies."""
    wide = str(arr.type) in ("large_string", "large_utf8")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if wide else np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = memoryview(arr.buffers()[2] or b"")[int(offsets[0]) : int(offsets[-1])]
    return offsets.astype(np.int64) - int(offsets[0]), data


def _read_snapshot(con: duckdb.DuckDBPyConnection, out: Path, dim: int) -> dict[str, Any]:
    """Copy the snapshot's current memories into the index folder, sorted by (user, id64).
    Columnar all the way (arrow buffers to files), no per-row Python work."""
    users = con.execute(f"select user_id, count(*) {CURRENT} group by user_id order by user_id").fetchall()
    kinds = [r[0] for r in con.execute(f"select distinct kind {CURRENT} and kind is not null order by kind").fetchall()]
    n = sum(c for _, c in users)
    vec = np.lib.format.open_memmap(out / "vectors.npy", mode="w+", dtype=np.float32, shape=(n, dim))
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("id64", "kind", "strength", "memory_id", "question", "fp")}
    has_question = bool(con.execute(
        "select count(*) from duckdb_columns() where table_name = 'long_term_memory' and column_name = 'is_question'"
    ).fetchall()[0][0])
    question_expr = "coalesce(is_question, false)" if has_question else "false"
    offsets = np.zeros(n + 1, dtype=np.int64)
    kind_list = "[" + ", ".join("'" + k.replace("'", "''") + "'" for k in kinds) + "]::varchar[]"
    reader = con.sql(
        "select (md5_number_upper(memory_id) >> 2)::bigint as id64,"
        f" coalesce(list_position({kind_list}, kind) - 1, {len(kinds)})::smallint as kind_code, strength, embedding,"
        " memory_id, json_array(content, coalesce(source_message_ids, []::varchar[]))::varchar as payload,"
        f" {question_expr} as is_question, {fingerprint_expr(con)} as fp"
        f" {CURRENT} order by user_id, id64").to_arrow_reader(50_000)
    pos = 0
    with open(out / "payload.bin", "wb") as payload:
        for batch in reader:
            m = batch.num_rows
            for name, col in (("id64", 0), ("kind", 1), ("strength", 2)):
                cols[name].append(batch.column(col).to_numpy(zero_copy_only=False))
            cols["memory_id"].append(batch.column(4).to_numpy(zero_copy_only=False).astype(bytes))
            cols["question"].append(batch.column(6).to_numpy(zero_copy_only=False).astype(bool))
            cols["fp"].append(batch.column(7).to_numpy(zero_copy_only=False).astype(np.uint64))
            emb = batch.column(3)
            flat = np.asarray(emb.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
            if emb.null_count:  # NULL embeddings become zero vectors, which never rank
                valid = ~np.asarray(emb.is_null().to_numpy(zero_copy_only=False))
                block = np.zeros((m, dim), dtype=np.float32)
                block[valid] = flat.reshape(m, dim)[valid] if len(flat) == m * dim else flat.reshape(-1, dim)
            else:
                block = flat.reshape(m, dim)
            vec[pos : pos + m] = block
            rel, data = _string_buffers(batch.column(5))
            payload.write(data)
            offsets[pos + 1 : pos + m + 1] = offsets[pos] + rel[1:]
            pos += m
    vec.flush()
    np.save(out / "payload.npy", offsets)
    joined = {k: (np.concatenate(v) if v else np.array([])) for k, v in cols.items()}
    counts = np.array([c for _, c in users], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return {"n": n, "vectors": vec, "users": [u for u, _ in users], "starts": starts, "stops": starts + counts,
            "kinds": kinds, **joined}


def _norms(vec: np.ndarray) -> np.ndarray:
    out = np.empty(len(vec), dtype=np.float64)
    for s in range(0, len(vec), 100_000):
        block = vec[s : s + 100_000].astype(np.float64)
        out[s : s + 100_000] = np.sqrt(np.einsum("ij,ij->i", block, block))
    out[~np.isfinite(out)] = 0.0
    return out


def _unit_rows(vec: np.ndarray, norm: np.ndarray, rows: np.ndarray) -> np.ndarray:
    x = np.asarray(vec[rows], dtype=np.float32)
    return x / norm[rows, None].astype(np.float32)


def _train_ivf(x: np.ndarray, ids: np.ndarray, settings: IndexSettings, dim: int) -> Any:
    faiss = _faiss()
    nlist = int(max(16, min(65_536, settings.lists_per_sqrt * np.sqrt(len(x)))))
    quantizer = faiss.IndexFlatIP(dim)
    ivf = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(len(x))
    sample = x[np.sort(rng.choice(len(x), min(len(x), nlist * 40), replace=False))]
    ivf.cp.niter = 10
    ivf.train(sample)
    ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # re-ranking reads vectors by id from RAM
    ivf.add_with_ids(x, ids)
    return ivf


def build_index(snapshot: Path, previous: Path | None = None) -> dict[str, Any]:
    """Write ``snap-X.index/`` for ``snapshot``, reusing ``previous`` (an older index folder) for
    big users whose IVF can be updated in place. Returns what it did (for logs and benchmarks)."""
    faiss = _faiss()
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
        prev_meta = _load_meta(previous) if previous is not None else None
        reusable = prev_meta is not None and prev_meta["dim"] == dim and prev_meta["format"] == FORMAT
        data = read_snapshot_reusing(con, tmp, dim, CURRENT, previous) if reusable and previous is not None else None
        if data is None:  # no usable previous index (or most rows changed): read every row
            data = _read_snapshot(con, tmp, dim)
            data["norm"] = _norms(data["vectors"])
            data["reused"], data["changed_ids"] = 0, np.zeros(0, dtype=np.int64)
    finally:
        con.close()
    read_s = time.monotonic() - started
    vec = data["vectors"]
    norm = data["norm"]
    order = sorted(range(len(data["users"])), key=lambda i: data["users"][i].encode())  # for searchsorted
    users = [data["users"][i] for i in order]
    user_start, user_stop = data["starts"][order], data["stops"][order]
    kinds = data["kinds"]
    np.save(tmp / "users.npy", np.array([u.encode() for u in users], dtype=bytes))
    np.save(tmp / "user_start.npy", np.stack([user_start, user_stop], axis=1))
    np.save(tmp / "id64.npy", data["id64"].astype(np.int64))
    np.save(tmp / "memory_id.npy", data["memory_id"])
    np.save(tmp / "kind.npy", data["kind"].astype(np.int16))
    np.save(tmp / "strength.npy", data["strength"].astype(np.float64))
    np.save(tmp / "question.npy", data["question"].astype(bool))
    np.save(tmp / "fp.npy", data["fp"].astype(np.uint64))
    np.save(tmp / "norm.npy", norm)

    changed = data["changed_ids"]  # same memory, new content: its old vector leaves the IVF
    big: dict[str, dict[str, Any]] = {}
    stats = {"rows": int(data["n"]), "users": len(users), "indexed_users": 0, "added": 0, "removed": 0, "trained": 0,
             "reused_rows": int(data["reused"]), "linked_ivf": 0}
    for user, lo, hi in zip(users, user_start.tolist(), user_stop.tolist()):
        if hi - lo <= settings.min_rows:
            continue
        rows = np.arange(lo, hi)[norm[lo:hi] > 0]
        ids = data["id64"][rows].astype(np.int64)
        name = f"ivf-{len(big)}.faiss"
        old = prev_meta["ivf"].get(str(user)) if reusable else None
        ivf = None
        if old is not None and len(rows) <= old["trained_rows"] * settings.retrain_growth:
            prev_ids = _user_ids(previous, prev_meta, str(user))
            if prev_ids is not None:
                gone = np.setdiff1d(prev_ids, ids, assume_unique=True)
                new = np.isin(ids, prev_ids, invert=True, kind="sort")
                if len(changed):  # re-add with the new vector (or just remove: now a zero vector)
                    gone = np.union1d(gone, np.intersect1d(prev_ids, changed))
                    new |= np.isin(ids, changed, kind="sort")
                if not len(gone) and not new.any():  # unchanged user: the previous file as is
                    os.link(previous / old["file"], tmp / name)
                    big[str(user)] = {"file": name, "trained_rows": int(old["trained_rows"]), "nlist": int(old["nlist"])}
                    stats["indexed_users"] += 1
                    stats["linked_ivf"] += 1
                    continue
                ivf = faiss.read_index(str(previous / old["file"]))
                if len(gone):  # O(removed) with the hash-table direct map
                    gone = np.ascontiguousarray(gone, dtype=np.int64)
                    ivf.remove_ids(faiss.IDSelectorArray(len(gone), faiss.swig_ptr(gone)))
                if new.any():
                    ivf.add_with_ids(_unit_rows(vec, norm, rows[new]), ids[new])
                stats["added"] += int(new.sum())
                stats["removed"] += len(gone)
                trained_rows = old["trained_rows"]
        if ivf is None:
            ivf = _train_ivf(_unit_rows(vec, norm, rows), ids, settings, dim)
            stats["trained"] += 1
            stats["added"] += len(rows)
            trained_rows = len(rows)
        faiss.write_index(ivf, str(tmp / name))
        big[str(user)] = {"file": name, "trained_rows": int(trained_rows), "nlist": int(ivf.nlist)}
        stats["indexed_users"] += 1
    meta = {"format": FORMAT, "dim": dim, "snapshot": snapshot.name, "kinds": kinds,
            "settings": asdict(settings), "ivf": big, "stats": stats}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    del vec
    _fsync_tree(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    stats["seconds"] = round(time.monotonic() - started, 3)
    stats["read_snapshot_seconds"] = round(read_s, 3)  # O(store) copy; the rest is IVF work
    return stats


def _fsync_tree(folder: Path) -> None:
    for p in folder.iterdir():
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _load_meta(folder: Path | None) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "meta.json").read_text()) if folder is not None else None
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _user_ids(folder: Path, meta: dict[str, Any], user: str) -> np.ndarray | None:
    users = np.load(folder / "users.npy")
    i = int(np.searchsorted(users, user.encode()))
    if i >= len(users) or users[i] != user.encode():
        return None
    lo, hi = np.load(folder / "user_start.npy")[i]
    ids = np.asarray(np.load(folder / "id64.npy", mmap_mode="r")[lo:hi])
    return ids[np.asarray(np.load(folder / "norm.npy", mmap_mode="r")[lo:hi]) > 0]


# --- searching ------------------------------------------------------------------------------

class SnapshotIndex:
    """A loaded sidecar index: arrays memory-mapped, a user's IVF read into RAM on first use."""

    def __init__(self, folder: Path, strength_weight: float = 1.0, question_weight: float = 1.0) -> None:
        meta = _load_meta(folder)
        if meta is None or meta.get("format") != FORMAT:
            raise FileNotFoundError(f"no usable index in {folder}")
        self.folder = folder
        self.meta = meta
        self.dim: int = meta["dim"]
        self.settings = IndexSettings(**meta["settings"])
        self.kinds: list[str | None] = [*meta["kinds"], None]  # the last code is a NULL kind
        load = lambda name: np.load(folder / f"{name}.npy", mmap_mode="r")  # noqa: E731
        self.users = np.load(folder / "users.npy")
        self.user_start = np.load(folder / "user_start.npy")
        self.id64, self.memory_id, self.kind = load("id64"), load("memory_id"), np.load(folder / "kind.npy")
        self.strength, self.norm = np.load(folder / "strength.npy"), np.load(folder / "norm.npy")
        question = np.load(folder / "question.npy") if (folder / "question.npy").exists() else np.zeros(len(self.strength), bool)
        # the score multiplier of the compiled statement's vector fusion (macros/recall.sql)
        self.factor = (1 - strength_weight + strength_weight * self.strength) * np.where(question, question_weight, 1.0)
        self.vectors, self.payload_off = load("vectors"), np.load(folder / "payload.npy")
        self.payload = np.memmap(folder / "payload.bin", dtype=np.uint8, mode="r") if self.payload_off[-1] else b""
        # Rows of indexed users are read with pread (page cache, not this process's RSS); small
        # users' blocks are scanned through the memory map.
        self._fd = os.open(folder / "vectors.npy", os.O_RDONLY)
        self._row_bytes = self.dim * 4
        self._ivf: dict[str, Any] = {}
        self._strength_range: dict[str, tuple[float, float]] = {}
        for user in self.meta["ivf"]:  # load now, not on a request
            self._ivf_of(user)
            lo, hi = self.block(user)
            self._strength_range[user] = (float(np.nanmax(self.factor[lo:hi])), float(np.nanmin(self.factor[lo:hi])))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._ivf.clear()

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            self.close()

    def _read_block(self, lo: int, hi: int) -> np.ndarray:
        data = os.pread(self._fd, (hi - lo) * self._row_bytes, self.vectors.offset + lo * self._row_bytes)
        return np.frombuffer(data, dtype=np.float32).reshape(hi - lo, self.dim)

    def _gather(self, rows: np.ndarray) -> np.ndarray:
        size, base = self._row_bytes, self.vectors.offset
        data = b"".join(os.pread(self._fd, size, base + int(r) * size) for r in rows)
        return np.frombuffer(data, dtype=np.float32).reshape(len(rows), self.dim)

    @classmethod
    def open(cls, snapshot: Path, strength_weight: float = 1.0, question_weight: float = 1.0) -> "SnapshotIndex | None":
        folder = index_dir(snapshot)
        if not (folder / "meta.json").exists():
            return None
        try:
            return cls(folder, strength_weight, question_weight)
        except (FileNotFoundError, ValueError, KeyError, OSError):
            return None

    def block(self, user_id: str) -> tuple[int, int]:
        key = user_id.encode()
        i = int(np.searchsorted(self.users, key))
        if i >= len(self.users) or self.users[i] != key:
            return 0, 0
        return int(self.user_start[i][0]), int(self.user_start[i][1])

    def payload_of(self, row: int) -> tuple[str, list[str]]:
        lo, hi = int(self.payload_off[row]), int(self.payload_off[row + 1])
        content, sources = json.loads(bytes(self.payload[lo:hi]).decode("utf-8"))
        return content, sources

    def _ivf_of(self, user_id: str) -> Any:
        if user_id not in self._ivf:
            faiss = _faiss()
            # in RAM: a memory-mapped IVF pays page faults on every list it touches first
            self._ivf[user_id] = faiss.read_index(str(self.folder / self.meta["ivf"][user_id]["file"]))
        return self._ivf[user_id]

    def search(self, user_id: str, vectors: np.ndarray, top_k: int, min_sim: float,
               kinds: Sequence[str] | None) -> list[list[Hit]]:
        """Top ``top_k`` memories of ``user_id`` per query vector, ranked like the compiled
        statement's vector fusion: cosine x factor desc, then memory_id; cosine >= ``min_sim``;
        kind filter."""
        lo, hi = self.block(user_id)
        q64 = np.asarray(vectors, dtype=np.float64).reshape(-1, self.dim)
        if hi == lo:
            return [[] for _ in q64]
        allowed = None
        if kinds is not None:
            codes = [self.kinds.index(k) for k in set(kinds) if k in self.kinds]
            allowed = np.zeros(len(self.kinds), dtype=bool)
            allowed[codes] = True
            if not allowed.any():
                return [[] for _ in q64]
        big = user_id in self.meta["ivf"]
        out = []
        for q in q64:
            qn = q / np.linalg.norm(q)
            if big:
                out.append(self._search_ivf(user_id, lo, hi, qn, top_k, min_sim, allowed))
            else:
                out.append(self._scan(lo, hi, qn, top_k, min_sim, allowed))
        return out

    def _cosines(self, rows: np.ndarray, qn: np.ndarray, mapped: bool) -> np.ndarray:
        """float64 cosines of ``rows`` from the stored vectors (memory map or pread)."""
        x = self.vectors[rows] if mapped else self._gather(rows)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (np.asarray(x, dtype=np.float64) @ qn) / self.norm[rows]

    def _final(self, rows: np.ndarray, cos: np.ndarray, top_k: int, min_sim: float,
               allowed: np.ndarray | None) -> list[Hit]:
        """Rank ``rows`` (unique) with their float64 cosines like the compiled statement."""
        norm = self.norm[rows]
        ok = (norm > 0) & np.isfinite(cos) & (cos >= min_sim) & np.isfinite(self.factor[rows])
        if allowed is not None:
            ok &= allowed[self.kind[rows]]
        r, c = rows[ok], cos[ok]
        score = self.factor[r] * c
        ids = self.memory_id[r]
        order = np.lexsort((ids, -score))[:top_k]
        return [Hit(int(r[i]), ids[i].decode(), self.kinds[self.kind[r[i]]], float(c[i]), float(self.strength[r[i]]),
                    float(score[i])) for i in order]

    def _scan(self, lo: int, hi: int, qn: np.ndarray, top_k: int, min_sim: float,
              allowed: np.ndarray | None) -> list[Hit]:
        """Exact: float32 screening of the whole block in chunks, keeping each chunk's top k
        (with a margin for float32 error), then the float64 re-rank of what was kept."""
        q32 = qn.astype(np.float32)
        mapped = hi - lo <= self.settings.min_rows
        keep = [np.zeros(0, dtype=np.int64)]
        for a in range(lo, hi, SCAN_CHUNK):
            b = min(hi, a + SCAN_CHUNK)
            block = self.vectors[a:b] if mapped else self._read_block(a, b)
            norm = self.norm[a:b]
            with np.errstate(invalid="ignore", divide="ignore"):
                cos = (block @ q32).astype(np.float64) / norm
            ok = (norm > 0) & np.isfinite(cos) & (cos >= min_sim - TIE_MARGIN)
            if allowed is not None:
                ok &= allowed[self.kind[a:b]]
            rows = np.flatnonzero(ok)
            if len(rows) > top_k:
                score = self.factor[a + rows] * cos[rows]
                kth = np.partition(score, len(score) - top_k)[len(score) - top_k]
                rows = rows[score >= kth - TIE_MARGIN]
            keep.append(rows + a)
        rows = np.concatenate(keep)
        return self._final(rows, self._cosines(rows, qn, mapped), top_k, min_sim, allowed)

    def _search_ivf(self, user_id: str, lo: int, hi: int, qn: np.ndarray, top_k: int, min_sim: float,
                    allowed: np.ndarray | None) -> list[Hit]:
        faiss = _faiss()
        faiss.omp_set_num_threads(1)  # one query at a time: threads cost more than they give
        ivf = self._ivf_of(user_id)
        s = self.settings
        s_max, s_min = self._strength_range[user_id]
        k_cand, nprobe = max(s.candidates, 8 * top_k), s.nprobe
        block_ids = self.id64[lo:hi]
        q32 = qn.astype(np.float32).reshape(1, -1)
        while True:
            params = faiss.SearchParametersIVF(nprobe=min(nprobe, ivf.nlist))
            _, found = ivf.search(q32, k_cand, params=params)
            ids = found[0][found[0] >= 0]
            rows = lo + np.searchsorted(block_ids, ids)
            # the IVF holds the unit vectors in RAM: re-rank from them, no disk read per request
            cos = np.asarray(ivf.reconstruct_batch(ids), dtype=np.float64) @ qn
            hits = self._final(rows, cos, top_k, min_sim, allowed)
            if len(ids) == k_cand:
                worst = float(np.nanmin(cos)) if len(cos) else -1.0
                if worst < min_sim - TIE_MARGIN:
                    return hits  # every outsider is below the threshold
                if len(hits) == top_k:
                    kth = hits[-1].score
                    bound = s_max * worst if worst >= 0 else s_min * worst
                    if bound < kth - TIE_MARGIN:
                        return hits  # no outsider can reach the k-th score
            elif nprobe >= ivf.nlist:
                return hits  # every list was probed: the candidate set is the whole block
            if k_cand * 2 > s.max_share * (hi - lo) or nprobe * 2 > ivf.nlist * s.max_share:
                return self._scan(lo, hi, qn, top_k, min_sim, allowed)
            k_cand, nprobe = k_cand * 2, nprobe * 2
