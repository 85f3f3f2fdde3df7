"""The serving index's one call into SQL: candidates an index proposed, ranked by the snapshot's
compiled rank statement (macros/recall.sql ``shim_rank_sql``: ``recall_rank_sql`` and
``recall_score``, the same SQL as the analysts' and the compiled recall statement).

Python holds no score formula. A candidate generator (recall_shim/serving/hybrid.py) proposes, per
intent, candidate rows with their leg values (cosine, BM25, ranks, the intent's min / max cosine)
and the *bound*: the leg values no memory outside the candidates can exceed. The statement scores
the bound with the same ``recall_score`` at every corner of the user's (strength, is_question)
range, so its result bounds every outsider's score (the score rises with cosine and BM25, falls
with the ranks, and is linear in strength). An answer is final when the k-th score beats it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import duckdb
import numpy as np

from recall_shim.serving.index import TIE_MARGIN, Hit, SnapshotIndex


class Unserved(Exception):
    """This request is not answered from the index; the caller runs the compiled statement."""


@dataclass
class Lexical:
    """One intent's lexical matches in the user's block: rows ascending, their BM25."""

    rows: np.ndarray
    score: np.ndarray

    def of(self, rows: np.ndarray) -> np.ndarray:
        """BM25 of ``rows``, NaN where a row has no lexical match."""
        if not len(self.rows):
            return np.full(len(rows), np.nan)
        i = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
        return np.where(self.rows[i] == rows, self.score[i], np.nan)


@dataclass(frozen=True)
class Bound:
    """Leg values no memory outside an intent's candidates exceeds: cosine at most
    ``similarity``, BM25 at most ``lexical`` (None: none has a lexical match), vector rank at
    least ``vector_rank``, lexical rank at least ``lexical_rank`` (None: no lexical match)."""

    similarity: float
    lexical: float | None = None
    vector_rank: int | None = None
    lexical_rank: int | None = None


@dataclass
class Candidates:
    """One intent's proposal: snapshot rows (unique, in scope, with a vector) and their legs."""

    rows: np.ndarray
    cos: np.ndarray
    lexical: np.ndarray  # BM25, NaN = no lexical match
    sim_min: float = 0.0
    sim_max: float = 0.0
    vector_rank: np.ndarray | None = None
    lexical_rank: np.ndarray | None = None  # 0 = no lexical match
    bound: Bound | None = None  # None: no memory outside the candidates can rank


@dataclass
class Ranked:
    hits: list[Hit]
    bound: float | None  # the best score an outsider could reach (None: none can rank)
    vector_bound: float | None = None  # the same from the vector leg's bound alone

    def vector_leg_limits(self, top_k: int) -> bool:
        """Whether the vector leg's bound alone still reaches the k-th score (widen that leg)."""
        if self.vector_bound is None:
            return False
        return len(self.hits) < top_k or self.hits[-1].score - TIE_MARGIN <= self.vector_bound

    def settled(self, top_k: int) -> bool:
        """No memory outside the candidates can enter the top k."""
        if self.bound is None:
            return True
        return len(self.hits) == top_k and self.hits[-1].score - TIE_MARGIN > self.bound


def _opt(values: np.ndarray | None, n: int, missing: float) -> list:
    if values is None:
        return [None] * n
    return [None if v == missing or v != v else v for v in values.tolist()]


class Ranker:
    """Runs the snapshot's rank statement on its open connection."""

    def __init__(self, sql_text: str) -> None:
        self.sql_text = sql_text

    def rank(self, con: duckdb.DuckDBPyConnection, index: SnapshotIndex, user_id: str,
             proposals: Sequence[Candidates], top_k: int, min_sim: float) -> list[Ranked]:
        """One statement for every intent's candidates; one Ranked per proposal."""
        n = len(proposals)
        corners = index.factor_corners(user_id)
        intent: list[int] = []
        rows_all: list[np.ndarray] = []
        cos: list[float] = []
        lex: list = []
        vr: list = []
        lr: list = []
        b_cols: list[list] = [[] for _ in range(8)]
        for i, p in enumerate(proposals, start=1):
            m = len(p.rows)
            intent += [i] * m
            rows_all.append(p.rows)
            cos += p.cos.tolist()
            lex += _opt(p.lexical, m, np.nan)
            vr += _opt(p.vector_rank, m, 0)
            lr += _opt(p.lexical_rank, m, 0)
            if p.bound is not None:
                b = p.bound
                parts = [(0, b.lexical, b.lexical_rank)] + ([(1, None, None)] if b.lexical is not None else [])
                for part, lexical, lexical_rank in parts:
                    for strength, question in corners:
                        for col, v in zip(b_cols, (i, b.similarity, lexical, b.vector_rank, lexical_rank, strength,
                                                   question, part)):
                            col.append(v)
        # an all-NULL column goes as an empty array (unnest pads the shorter arrays with NULL)
        vr, lr = (vr if any(v is not None for v in vr) else []), (lr if any(v is not None for v in lr) else [])
        rows = np.concatenate(rows_all) if rows_all else np.zeros(0, np.int64)
        ids = [m.decode() for m in index.memory_id[rows].tolist()]
        params = [intent, ids, cos, lex, index.strength[rows].tolist(), index.question[rows].tolist(), vr, lr,
                  [p.sim_min for p in proposals], [p.sim_max for p in proposals], int(top_k), float(min_sim), *b_cols]
        out = [Ranked([], None) for _ in range(n)]
        by_id = [dict(zip(ids[a:b], rows[a:b].tolist())) for a, b in _spans([len(p.rows) for p in proposals])]
        found = sorted(con.execute(self.sql_text, params).fetchall(), key=lambda t: (t[0], t[1]))
        for intent_id, rank, memory_id, sim, score, lexical in found:
            r = out[intent_id - 1]
            if rank <= 0:  # no bound row (or none reaching the threshold): no outsider can rank
                value = float(score) if score is not None else None
                if rank == 0:
                    r.bound = value
                else:
                    r.vector_bound = value
                continue
            row = by_id[intent_id - 1][memory_id]
            r.hits.append(Hit(row, memory_id, index.kinds[index.kind[row]], float(sim), float(index.strength[row]),
                              float(score), float(lexical or 0.0)))
        return out


def _spans(lengths: list[int]) -> list[tuple[int, int]]:
    out, a = [], 0
    for n in lengths:
        out.append((a, a + n))
        a += n
    return out
