"""Small users' memories kept in the process, for the vector fusion on PostgreSQL
(docs/scaling_out.md, "Recall paths").

A user served by the exact scan (at most ``recall_index_min_rows`` current memories: ann.py) is
read once, in one statement: every current memory's id, kind, content, sources, strength,
is_question and raw vector (pgvector's binary form), together with the store's generation
(generation.py) from the same snapshot. Later recalls of that user read only the generation (one
single-row SELECT); while it is the same, the answer is computed here as DuckDB's serving index
computes it (recall_shim/serving/index.py): float32 screening of the user's matrix, then the
float64 cosines of the rows that can still reach the top k, scored by the build's own expressions
(recall_shim/serving/formula.py, rendered from macros/recall.sql: no copy of the score here),
raw-cosine threshold, kind filter, ties by memory_id. A different generation drops every entry
of the process: a build or a forget by any process moves it (a forget in its own transaction),
so a forgotten memory is never answered from here after the forget's COMMIT.

Memory: entries are evicted least recently used beyond ``max_rows`` memories in total (default
``DEFAULT_MAX_ROWS``: about 1.6 kB per memory at 384 dimensions, vectors and text); a user with
more rows than that is not kept and takes the exact scan every time.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from recall_shim.common.sql import sql_ident
from recall_shim.serving.formula import RecallFormula
from recall_shim.serving.index import TIE_MARGIN, row_dots
from recall_shim.targets.postgres.generation import GENERATION_TABLE, generation_sql

__all__ = ["UserCache", "DEFAULT_MAX_ROWS", "rank_entry"]

DEFAULT_MAX_ROWS = 100_000


@dataclass
class _Entry:
    memory_id: np.ndarray      # object (str)
    kind: np.ndarray           # object (str)
    content: list[str]
    sources: list[list[str]]
    dates: list[tuple[Any, Any, Any]]  # (created_at, happened_on, happened_grain) per memory
    strength: np.ndarray       # float64
    is_question: np.ndarray    # bool
    vectors: np.ndarray        # float32, one row per memory (zeros where the embedding is NULL)
    norm: np.ndarray           # float64 L2 norms (0: never ranks, as a NULL similarity)
    is_assistant: np.ndarray   # bool: kind 'assistant' (an input of the factor)
    is_episode: np.ndarray     # bool: kind 'episode'
    factor: np.ndarray | None = None      # the factor of the formula whose texts are factor_of
    factor_of: tuple[str, ...] | None = None

    def factor_by(self, formula: RecallFormula) -> np.ndarray:
        """The build's factor of every kept memory (computed once per formula)."""
        if self.factor is None or self.factor_of != formula.texts:
            self.factor = formula.factor(strength=self.strength, is_question=self.is_question,
                                         is_assistant=self.is_assistant, to_assistant=False)
            self.factor_of = formula.texts
        return self.factor


class UserCache:
    """Per-store cache of small users' current memories, valid for one store generation."""

    def __init__(self, schema: str, max_rows: int = DEFAULT_MAX_ROWS) -> None:
        self.schema = schema
        self.max_rows = max_rows
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._rows = 0
        self._generation: int | None = None
        self._has_table: bool | None = None
        self.hits = 0    # recalls answered from a kept entry (for benchmarks and tests)
        self.loads = 0   # entries read from the tables

    def reset(self) -> None:
        self._entries.clear()
        self._rows = 0
        self._generation = None
        self._has_table = None

    def _current_generation(self, con: Any) -> int | None:
        """The store's generation (None: the schema predates migration 7, nothing is kept)."""
        if self._has_table is None:
            name = f"{sql_ident(self.schema)}.{sql_ident(GENERATION_TABLE)}"
            self._has_table = con.execute("select to_regclass(%s)", [name]).fetchone()[0] is not None
        if not self._has_table:
            return None
        row = con.execute(generation_sql(self.schema)).fetchone()
        return None if row is None else int(row[0])

    def entry(self, con: Any, user_id: str, dim: int) -> _Entry | None:
        """The user's kept memories, read again when the generation moved; None when they cannot
        be kept (no generation table, more than ``max_rows`` rows, or ``max_rows`` 0: off)."""
        if self.max_rows <= 0:
            return None
        generation = self._current_generation(con)
        if generation is None:
            return None
        if generation != self._generation:
            self._entries.clear()
            self._rows = 0
            self._generation = generation
        hit = self._entries.get(user_id)
        if hit is not None:
            self._entries.move_to_end(user_id)
            self.hits += 1
            return hit
        loaded = self._load(con, user_id, dim)
        if loaded is None:
            return None
        read_at, entry = loaded
        if read_at != generation:  # a build or forget committed in between: keep nothing of either
            self._entries.clear()
            self._rows = 0
            self._generation = read_at
        self.loads += 1
        n = len(entry.memory_id)
        if n > self.max_rows:
            return entry
        self._entries[user_id] = entry
        self._rows += n
        while self._rows > self.max_rows and len(self._entries) > 1:
            _, old = self._entries.popitem(last=False)
            self._rows -= len(old.memory_id)
        return entry

    def _load(self, con: Any, user_id: str, dim: int) -> tuple[int, _Entry] | None:
        s = sql_ident(self.schema)
        rows = con.execute(
            f"select g.generation, m.memory_id, m.kind, m.content, m.strength, m.source_message_ids,"
            f" m.is_question, vector_send(m.embedding::vector({int(dim)})), m.created_at, m.happened_on,"
            f" m.happened_grain"
            f" from {s}.{sql_ident(GENERATION_TABLE)} as g"
            f" left join {s}.long_term_memory as m on m.user_id = %s and m.valid_to is null"
            f" where g.id = 1 order by m.memory_id", [user_id]).fetchall()
        if not rows:
            return None
        generation = int(rows[0][0])
        rows = [r for r in rows if r[1] is not None]
        vectors = np.zeros((len(rows), dim), dtype=np.float32)
        for i, r in enumerate(rows):
            if r[7] is not None:  # pgvector's binary form: int16 dim, int16 unused, dim big-endian float4
                vectors[i] = np.frombuffer(bytes(r[7]), dtype=">f4", count=dim, offset=4)
        wide = vectors.astype(np.float64)
        norm = np.sqrt(np.einsum("ij,ij->i", wide, wide))
        norm[~np.isfinite(norm)] = 0.0
        kind = np.array([r[2] for r in rows], dtype=object)
        return generation, _Entry(
            memory_id=np.array([r[1] for r in rows], dtype=object),
            kind=kind,
            is_assistant=np.array([k == "assistant" for k in kind], dtype=bool),
            is_episode=np.array([k == "episode" for k in kind], dtype=bool),
            content=[r[3] for r in rows],
            sources=[list(r[5] or []) for r in rows],
            dates=[(r[8], r[9], r[10]) for r in rows],
            strength=np.array([np.nan if r[4] is None else float(r[4]) for r in rows], dtype=np.float64),
            is_question=np.array([bool(r[6]) for r in rows], dtype=bool),
            vectors=vectors,
            norm=norm)


def rank_entry(entry: _Entry, formula: RecallFormula, vector: Sequence[float], *, top_k: int, min_sim: float,
               kinds: Sequence[str] | None, episodes_by_default: bool) -> list[tuple[Any, ...]]:
    """The top k of one intent over a kept user, as (memory_id, kind, content, similarity,
    strength, score, sources, (said_at, happened_on, happened_grain)), the compiled statement's order."""
    n = len(entry.memory_id)
    if n == 0:
        return []
    q = np.asarray(vector, dtype=np.float64)
    qnorm = float(np.sqrt(q @ q))
    if not qnorm > 0:
        return []
    qn = q / qnorm
    if kinds is not None:
        allowed = np.isin(entry.kind, list(kinds))
    elif not episodes_by_default:
        allowed = ~entry.is_episode
    else:
        allowed = np.ones(n, dtype=bool)
    factor = entry.factor_by(formula)
    with np.errstate(invalid="ignore", divide="ignore"):
        c32 = (entry.vectors @ qn.astype(np.float32)).astype(np.float64) / entry.norm
    ok = (entry.norm > 0) & np.isfinite(c32) & (c32 >= min_sim - TIE_MARGIN) & allowed & np.isfinite(factor)
    rows = np.flatnonzero(ok)
    # screening: a row stays when its best possible score reaches the k-th surely-kept worst score
    lower = formula.score(formula.relevance(cos=c32[rows] - TIE_MARGIN), factor[rows])
    lower = np.where(c32[rows] - TIE_MARGIN >= min_sim, lower, -np.inf)
    upper = formula.score(formula.relevance(cos=c32[rows] + TIE_MARGIN), factor[rows])
    rows = rows[_reaching(lower, upper, top_k)]
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = row_dots(entry.vectors[rows], qn) / entry.norm[rows]
    keep = np.isfinite(cos) & (cos >= min_sim)
    rows, cos = rows[keep], cos[keep]
    score = formula.score(formula.relevance(cos=cos), factor[rows])
    ids = entry.memory_id[rows]
    order = np.lexsort((ids.astype(str), -score))[:top_k]
    return [(ids[i], entry.kind[rows[i]], entry.content[rows[i]], float(cos[i]), float(entry.strength[rows[i]]),
             float(score[i]), entry.sources[rows[i]], entry.dates[rows[i]]) for i in order]


def _reaching(lower: np.ndarray, upper: np.ndarray, top_k: int) -> np.ndarray:
    """Positions that can still enter the top k: near_top over the finite upper bounds, with
    rows of no certain lower bound (-inf) never setting the bar."""
    finite_upper = np.isfinite(upper)
    sure = np.isfinite(lower)
    if int(sure.sum()) < top_k:
        return np.flatnonzero(finite_upper)
    kth = np.partition(lower[sure], int(sure.sum()) - top_k)[int(sure.sum()) - top_k]
    return np.flatnonzero(finite_upper & (upper >= kth))
