"""Indexed recall: a sidecar beside each published snapshot that answers the vector leg of recall
in about a millisecond at a million memories, with the compiled statement's exact semantics.

Layout: ``snap-X.duckdb`` gets ``snap-X.index/`` (written by recall_shim/serving/index_build.py to a
temporary folder, then renamed, so a reader sees a whole index or none). Rows are the snapshot's current memories sorted by
(user_id, id64), so one user's memories are one contiguous block:

    meta.json          format, dim, kinds, settings, per-user IVF files
    users.npy          sorted user ids (bytes); user_start.npy (start, stop) row of each user
    id64.npy           stable 62-bit id per memory (md5 of memory_id), sorted within a user
    memory_id.npy      memory ids (bytes)       kind.npy   kind codes     strength.npy  float64
    slot.npy           slot codes (meta.json ``slots``; len(slots) = none); said.npy when each row was
                       said (epoch seconds): factor inputs of questions that ask for a slot or for the
                       current state (recall_shim/serving/asked.py)
    question.npy       episode is a question (bool), an input of the factor (formula.py)
    ctx_*.npy          the turn context's links (recall_shim/serving/context.py)
    win_*.npy          which rows are near each other in a conversation: the conversation lift
                       (recall_shim/serving/window.py); absent when the lift is off
    norm.npy           float64 L2 norms (0 = never ranks)
    fp.npy             fingerprint per row (content, sources, model, dates): the next build reuses rows
                       whose (id64, fp) it finds here (recall_shim/serving/index_reuse.py)
    vrow.npy           the row's heavy row in the generation's append-only heavy files
    vectors.f32, payload.bin, payload_end.i64
                       heavy rows (raw float32 vector; JSON [content, source_message_ids, said_at,
                       happened_on, happened_grain] and its end offset), shared by hard link between the folders of one
                       generation; meta.json ``heavy`` is the prefix this folder may read
                       (recall_shim/serving/index_heavy.py)
    ivf-<n>.faiss      faiss IVF-Flat over the normalised vectors of one user with many memories;
    ivf-<n>.held.npy   the (id64, fp) it holds; ivf-<n>.tail.npy the user's rows it does not hold
                       as is, scanned exactly per request (recall_shim/serving/index_ivf.py)

Recall is always for one user. A user with at most ``min_rows`` memories is scanned exactly
(numpy over that block: well under a millisecond). A bigger user's IVF yields candidates by
cosine; they are re-ranked exactly (the snapshot's score, relevance and factor expressions:
recall_shim/serving/formula.py, rendered from macros/recall.sql; float64; threshold on raw cosine,
kind filter, ties by memory_id) and the candidate set is widened (more probes, more candidates)
until no memory outside it could still enter the top k: the score is non-decreasing in cosine, so
the score at the worst retrieved cosine with the user's largest (or smallest) factor bounds every
outsider; once that is below the k-th score, the
answer is exact up to the IVF's probe recall (measured: benchmarks/recall_speed). Past
``max_share`` of the block it falls back to the exact scan.

Incremental (O(new) except the small light arrays): the builder (index_build.py) links the previous folder's heavy
files and appends only new and changed rows; a big user's IVF file is linked as is and its new or
changed rows form a tail, until tail + dropped pass ``tail_share`` of the IVF (then it is updated,
or retrained once the user grew ``retrain_growth`` times). A fresh heavy generation (compaction) is
written on the first build, past ``compact_share`` dead heavy rows, or when the dimension changes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from datetime import date, datetime
from typing import Any, NamedTuple, Sequence

import duckdb
import numpy as np

from recall_shim.serving.context import TurnLinks
from recall_shim.serving.window import TurnWindows
from recall_shim.serving.formula import RecallFormula, near_top
from recall_shim.serving.index_heavy import HeavyPrefix, HeavyReader
from recall_shim.serving.index_ivf import EMPTY_ROWS, valid_hits, load_faiss
from recall_shim.serving.recalled import as_date, as_datetime

FORMAT = 4  # 2: append-only heavy files (vrow), IVF tails; 3: the payload holds the dates; 4: turn links
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
    compact_share: float = 0.5    # a fresh heavy generation once dead heavy rows pass this share
    tail_share: float = 0.05      # update a user's IVF once its tail + dropped pass this share of it

    @classmethod
    def from_snapshot(cls, con: duckdb.DuckDBPyConnection) -> "IndexSettings":
        names = {r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()}
        if "recall_index_settings" not in names:
            return cls()
        row = con.sql("select * from recall_index_settings").to_arrow_table().to_pylist()
        values = row[0] if row else {}
        kw = {f.name: type(getattr(cls(), f.name))(values[f.name]) for f in fields(cls) if values.get(f.name) is not None}
        return cls(**kw)


class Payload(NamedTuple):
    """A heavy row's payload (what a result shows beside the score)."""

    content: str
    sources: list[str]
    said_at: datetime | None
    happened_on: date | None
    happened_grain: str | None


@dataclass(frozen=True)
class Hit:
    row: int
    memory_id: str
    kind: str | None
    similarity: float
    strength: float
    score: float
    lexical_score: float = 0.0  # BM25 of the query text (hybrid fusions); 0 for the vector fusion


def row_dots(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """float64 dot product of every row of ``x`` with ``q``, the same bits for equal rows wherever
    they sit (a BLAS matrix-vector product rounds rows differently by their position in the
    block, which would break exact score ties between duplicate memories)."""
    return np.einsum("ij,j->i", np.asarray(x, dtype=np.float64), q)


def index_dir(snapshot: Path) -> Path:
    return snapshot.with_suffix(".index")


def load_meta(folder: Path | None) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "meta.json").read_text()) if folder is not None else None
    except (FileNotFoundError, json.JSONDecodeError):
        return None


# --- searching ------------------------------------------------------------------------------

class SnapshotIndex:
    """A loaded sidecar index: arrays memory-mapped, a user's IVF read into RAM on first use."""

    def __init__(self, folder: Path, formula: RecallFormula | None = None) -> None:
        meta = load_meta(folder)
        if meta is None or meta.get("format") != FORMAT:
            raise FileNotFoundError(f"no usable index in {folder}")
        # the score to rank by: the snapshot's (the reader passes the one it compiled; FormulaError,
        # a ValueError, for a snapshot published before recall_queries carried it)
        self.formula = formula if formula is not None else RecallFormula.of_snapshot(folder.with_suffix(".duckdb"))
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
        self.vrow = np.load(folder / "vrow.npy")
        self.turns = TurnLinks.load(folder)  # the turn context's links (recall_shim/serving/context.py)
        # the rows near each other in a conversation: the conversation lift (recall_shim/serving/window.py)
        self.windows = TurnWindows.load(folder)
        question = np.load(folder / "question.npy") if (folder / "question.npy").exists() else np.zeros(len(self.strength), bool)
        # the factor per row, once for each value of the per-intent input to_assistant (the query
        # asks what the assistant said: var assistant_question_pattern, hybrid fusions only)
        said = self.kind == self.kinds.index("assistant") if "assistant" in self.kinds else np.zeros(len(self.strength), bool)
        self.factor, self.factor_said = (
            self.formula.factor(strength=self.strength, is_question=question, is_assistant=said, to_assistant=to)
            for to in (False, True))
        # the factor's per-row inputs, for questions whose factor is made per request (asked.py), and
        # the slot and the time said per row (None for an index written before slot.npy / said.npy:
        # such questions then run as compiled)
        self.question, self.assistant = question, said
        self.slots: list[str] = list(meta.get("slots", []))
        self.slot = np.load(folder / "slot.npy") if (folder / "slot.npy").exists() else None
        self.said = np.load(folder / "said.npy") if (folder / "said.npy").exists() else None
        # Vectors and payloads by heavy row (self.vrow): rows of indexed users are read with pread
        # (page cache, not this process's RSS); small users' blocks through the memory map.
        self.heavy = HeavyReader(folder, self.dim, HeavyPrefix.of(meta))
        self._ivf: dict[str, Any] = {}
        self._tail: dict[str, np.ndarray] = {}
        self._tail_vec: dict[str, np.ndarray] = {}  # the tail's raw vectors in RAM (at most tail_share of the IVF's)
        # (max, min) of a big user's factor (of factor_said): the IVF bounds take the factor at its ends
        self._strength_range: dict[str, tuple[float, float]] = {}
        self._said_range: dict[str, tuple[float, float]] = {}
        for user, entry in self.meta["ivf"].items():  # load now, not on a request
            self._ivf_of(user)
            self._tail[user] = np.load(folder / entry["tail"]) if entry.get("tail") else EMPTY_ROWS
            self._tail_vec[user] = np.array(self.vectors_of(self._tail[user], False))
            lo, hi = self.block(user)
            self._strength_range[user] = (float(np.nanmax(self.factor[lo:hi])), float(np.nanmin(self.factor[lo:hi])))
            self._said_range[user] = (float(np.nanmax(self.factor_said[lo:hi])), float(np.nanmin(self.factor_said[lo:hi])))

    def factor_range(self, user_id: str, factor: np.ndarray) -> tuple[float, float]:
        """(max, min) over a big user's rows of ``factor`` (self.factor or self.factor_said)."""
        return (self._said_range if factor is self.factor_said else self._strength_range)[user_id]

    def close(self) -> None:
        self.heavy.close()
        self._ivf.clear()

    def __del__(self) -> None:
        if getattr(self, "heavy", None) is not None:
            self.close()

    def vectors_of(self, rows: np.ndarray, mapped: bool) -> np.ndarray:
        """float32 vectors of snapshot rows ``rows`` (through vrow; contiguous runs are one read)."""
        return self.heavy.rows(self.vrow[rows], mapped)

    def range_vectors(self, lo: int, hi: int, mapped: bool) -> np.ndarray:
        return self.heavy.rows(self.vrow[lo:hi], mapped)

    def tail_of(self, user_id: str) -> np.ndarray:
        """The user's rows its IVF does not hold as is (scanned exactly per request)."""
        return self._tail.get(user_id, EMPTY_ROWS)

    def tail_cos32(self, user_id: str, qn: np.ndarray) -> np.ndarray:
        """float32-accurate cosines of every tail row (for screening; NaN/inf for zero vectors)."""
        tail = self.tail_of(user_id)
        if not len(tail):
            return np.zeros(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            # einsum: one thread (a BLAS matrix-vector product spins threads that cost more here)
            return np.einsum("ij,j->i", self._tail_vec[user_id], qn.astype(np.float32)).astype(np.float64) / self.norm[tail]

    def tail_exact(self, user_id: str, idx: np.ndarray, qn: np.ndarray) -> np.ndarray:
        """float64 cosines of the tail rows at positions ``idx`` (the same bits as ``_cosines``)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return row_dots(self._tail_vec[user_id][idx], qn) / self.norm[self.tail_of(user_id)[idx]]

    def _tail_candidates(self, user_id: str, qn: np.ndarray, top_k: int, min_sim: float,
                         allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The tail rows that can reach the top k (float32 screening with a margin, as ``_scan``)
        and their float64 cosines; the others score below k tail rows or the threshold."""
        tail = self.tail_of(user_id)
        if not len(tail):
            return EMPTY_ROWS, np.zeros(0)
        c32 = self.tail_cos32(user_id, qn)
        ok = (self.norm[tail] > 0) & np.isfinite(c32) & (c32 >= min_sim - TIE_MARGIN)
        if allowed is not None:
            ok &= allowed[self.kind[tail]]
        idx = np.flatnonzero(ok)
        idx = idx[self._near_top(c32[idx], self.factor[tail[idx]], top_k)]
        return tail[idx], self.tail_exact(user_id, idx, qn)

    def _near_top(self, c32: np.ndarray, factor: np.ndarray, top_k: int) -> np.ndarray:
        """Positions of float32-screened cosines that may reach the top k of the vector fusion's
        score: the score at c32 + TIE_MARGIN reaches the k-th largest score at c32 - TIE_MARGIN."""
        f = self.formula
        hi = f.score(f.relevance(cos=c32 + TIE_MARGIN), factor)
        if len(c32) <= top_k:
            return np.flatnonzero(np.isfinite(hi))
        return near_top(f.score(f.relevance(cos=c32 - TIE_MARGIN), factor), hi, top_k)

    @classmethod
    def open(cls, snapshot: Path, formula: RecallFormula | None = None) -> "SnapshotIndex | None":
        folder = index_dir(snapshot)
        if not (folder / "meta.json").exists():
            return None
        try:
            return cls(folder, formula)
        except (FileNotFoundError, ValueError, KeyError, OSError):
            return None

    def block(self, user_id: str) -> tuple[int, int]:
        key = user_id.encode()
        i = int(np.searchsorted(self.users, key))
        if i >= len(self.users) or self.users[i] != key:
            return 0, 0
        return int(self.user_start[i][0]), int(self.user_start[i][1])

    def payload_of(self, row: int) -> Payload:
        """The row's heavy payload: content, source_message_ids and the dates (said_at,
        happened_on, happened_grain)."""
        content, sources, said, on, grain = json.loads(self.heavy.payload_bytes(int(self.vrow[row])).decode("utf-8"))
        return Payload(content, sources, as_datetime(said), as_date(on), grain)

    def _ivf_of(self, user_id: str) -> Any:
        if user_id not in self._ivf:
            faiss = load_faiss()
            # in RAM: a memory-mapped IVF pays page faults on every list it touches first
            self._ivf[user_id] = faiss.read_index(str(self.folder / self.meta["ivf"][user_id]["file"]))
        return self._ivf[user_id]

    def search(self, user_id: str, vectors: np.ndarray, top_k: int, min_sim: float,
               kinds: Sequence[str] | None) -> list[list[Hit]]:
        """Top ``top_k`` memories of ``user_id`` per query vector, ranked like the compiled
        statement's vector fusion (the snapshot's score of the cosine) desc, then memory_id; cosine >= ``min_sim``;
        kind filter."""
        if not self.formula.uses <= {"cos"}:
            raise ValueError("SnapshotIndex.search ranks by a relevance of the cosine alone (hybrid: HybridSearcher)")
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
        x = self.vectors_of(rows, mapped)
        with np.errstate(invalid="ignore", divide="ignore"):
            return row_dots(x, qn) / self.norm[rows]

    def _final(self, rows: np.ndarray, cos: np.ndarray, top_k: int, min_sim: float,
               allowed: np.ndarray | None) -> list[Hit]:
        """Rank ``rows`` (unique) with their float64 cosines like the compiled statement."""
        norm = self.norm[rows]
        ok = (norm > 0) & np.isfinite(cos) & (cos >= min_sim) & np.isfinite(self.factor[rows])
        if allowed is not None:
            ok &= allowed[self.kind[rows]]
        r, c = rows[ok], cos[ok]
        score = self.formula.score(self.formula.relevance(cos=c), self.factor[r])
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
            block = self.range_vectors(a, b, mapped)
            norm = self.norm[a:b]
            with np.errstate(invalid="ignore", divide="ignore"):
                cos = (block @ q32).astype(np.float64) / norm
            ok = (norm > 0) & np.isfinite(cos) & (cos >= min_sim - TIE_MARGIN)
            if allowed is not None:
                ok &= allowed[self.kind[a:b]]
            rows = np.flatnonzero(ok)
            rows = rows[self._near_top(cos[rows], self.factor[a + rows], top_k)]
            keep.append(rows + a)
        rows = np.concatenate(keep)
        return self._final(rows, self._cosines(rows, qn, mapped), top_k, min_sim, allowed)

    def _search_ivf(self, user_id: str, lo: int, hi: int, qn: np.ndarray, top_k: int, min_sim: float,
                    allowed: np.ndarray | None) -> list[Hit]:
        faiss = load_faiss()
        faiss.omp_set_num_threads(1)  # one query at a time: threads cost more than they give
        ivf = self._ivf_of(user_id)
        s = self.settings
        s_max, s_min = self._strength_range[user_id]
        k_cand, nprobe = max(s.candidates, 8 * top_k), s.nprobe
        block_ids = self.id64[lo:hi]
        q32 = qn.astype(np.float32).reshape(1, -1)
        # the tail (rows the IVF does not hold as is) is scanned exactly: its possible top k are
        # candidates; IVF hits in the tail (changed memories) or gone are dropped
        tail = self.tail_of(user_id)
        tail_rows, tail_cos = self._tail_candidates(user_id, qn, top_k, min_sim, allowed)
        while True:
            params = faiss.SearchParametersIVF(nprobe=min(nprobe, ivf.nlist))
            _, found = ivf.search(q32, k_cand, params=params)
            ids = found[0][found[0] >= 0]
            # the IVF holds the unit vectors in RAM: re-rank from them, no disk read per request
            cos = row_dots(ivf.reconstruct_batch(ids), qn)
            rows, valid = valid_hits(block_ids, lo, ids, tail)  # gone or changed memories drop out
            hits = self._final(np.concatenate([rows[valid], tail_rows]), np.concatenate([cos[valid], tail_cos]),
                               top_k, min_sim, allowed)
            if len(ids) == k_cand:
                worst = float(np.nanmin(cos)) if len(cos) else -1.0  # bounds every IVF row not retrieved
                if worst < min_sim - TIE_MARGIN:
                    return hits  # every outsider is below the threshold
                if len(hits) == top_k:
                    kth = hits[-1].score
                    bound = self.formula.bound(float(self.formula.relevance(cos=worst)), s_min, s_max)
                    if bound < kth - TIE_MARGIN:
                        return hits  # no outsider can reach the k-th score
            elif nprobe >= ivf.nlist:
                return hits  # every list was probed: the candidate set is the whole block
            if k_cand * 2 > s.max_share * (hi - lo) or nprobe * 2 > ivf.nlist * s.max_share:
                return self._scan(lo, hi, qn, top_k, min_sim, allowed)
            k_cand, nprobe = k_cand * 2, nprobe * 2
