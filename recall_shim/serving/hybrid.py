"""Recall from the serving index: a candidate generator. The index computes the legs (cosines,
BM25 from the term postings, min / max cosine, ranks) and proposes candidates; the snapshot's rank
statement scores them (recall_shim/serving/rank.py; the score is macros/recall.sql ``recall_score``,
written once). No score is computed here.

Per intent, a proposal is A (the best memories by cosine) and B (the best lexical matches by
BM25), with the bound: every memory outside A has cosine <= c_A, every one outside B has BM25 <=
b_B (for rrf: vector rank > |A|, lexical rank > |B|). The statement scores the bound as a row;
when the k-th score beats it the answer is final, else the leg whose bound still reaches the k-th
score is doubled (the statement reports the vector leg's bound alone), and past ``max_share`` of
the user's memories the block is scanned exactly (the same loop over exact cosines).

- a user scanned exactly (at most ``min_rows`` memories, or the fallback): float32 cosines of the
  whole block are the "index" (A by cosine, c_A the next cosine plus the float32 error); exact
  float64 cosines for the candidates; rrf sorts the whole block in float64 for exact ranks.
- a user with an IVF (recall_shim/serving/index_ivf.py ``IvfLegs``): A from the IVF and the tail; mn / mx
  from the IVF (the negated query for mn). rrf needs exact global vector ranks, which an IVF
  cannot give: Unserved (the caller runs the compiled statement). So is ``lexical`` when fewer
  than top_k memories match a query term (the rest rank by memory_id at score 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import duckdb
import numpy as np

from recall_shim.serving.index import SCAN_CHUNK, TIE_MARGIN, Hit, SnapshotIndex
from recall_shim.serving.ivf_legs import IvfLegs, first_candidates
from recall_shim.serving.rank import Bound, Candidates, Lexical, Ranked, Ranker, Unserved
from recall_shim.serving.terms import Lexicon, TermPostings, tokenize

FUSIONS = ("weighted", "lexical", "rrf", "vector")

__all__ = ["FUSIONS", "Fusion", "HybridSearcher", "Unserved", "fusion_of"]


@dataclass(frozen=True)
class Fusion:
    """The fusion settings the snapshot's recall statement was compiled with (recall_queries)."""

    method: str
    vector_weight: float
    saturation: float
    rrf_k: float
    episodes_by_default: bool = True


class ExactLegs:
    """One intent's legs over a whole block: float32 cosines sorted are the vector "index"."""

    def __init__(self, ix: SnapshotIndex, method: str, lo: int, hi: int, qn: np.ndarray, lex: Lexical,
                 top_k: int, allowed: np.ndarray, mapped: bool) -> None:
        self.ix, self.method, self.qn, self.mapped = ix, method, qn, mapped
        c32 = block_cosines(ix, lo, hi, qn, mapped)
        in_scope = allowed[ix.kind[lo:hi]]
        ok = in_scope & np.isfinite(c32) & np.isfinite(ix.strength[lo:hi])
        self.rows, self.c32 = lo + np.flatnonzero(ok), c32[ok]
        self.m_a = self.m_b = first_candidates(ix, top_k)
        self.everything = False
        # lexical matches with a vector in scope (candidates), by BM25
        has = ok[lex.rows - lo] if len(lex.rows) else np.zeros(0, bool)
        self.b_rows, self.b_score = lex.rows[has], lex.score[has]
        self.lex = lex
        self.mn = self.mx = 0.0
        if not len(self.rows):
            return
        if method == "weighted":
            self.mx = float(np.max(self.exact(self.rows[self.c32 >= self.c32.max() - TIE_MARGIN])))
            self.mn = float(np.min(self.exact(self.rows[self.c32 <= self.c32.min() + TIE_MARGIN])))
        if method == "rrf":  # exact global ranks: vector over every scoped memory with a vector,
            # lexical over every scoped lexical match (with or without a vector)
            self.cos = self.exact(self.rows)
            fin = np.isfinite(self.cos)
            self.rows, self.cos = self.rows[fin], self.cos[fin]
            self.order = np.lexsort((ix.memory_id[self.rows], -self.cos))
            self.vrank = np.empty(len(self.rows), np.int64)
            self.vrank[self.order] = np.arange(1, len(self.rows) + 1)
            lsel = in_scope[lex.rows - lo] if len(lex.rows) else np.zeros(0, bool)
            self.l_rows, l_score = lex.rows[lsel], lex.score[lsel]
            self.l_order = np.lexsort((ix.memory_id[self.l_rows], -l_score))
            self.lrank = np.empty(len(self.l_rows), np.int64)
            self.lrank[self.l_order] = np.arange(1, len(self.l_rows) + 1)

    def exact(self, rows: np.ndarray) -> np.ndarray:
        return self.ix.cosines(rows, self.qn, self.mapped)

    def propose(self) -> Candidates:
        if not len(self.rows):
            return Candidates(self.rows, np.zeros(0), np.zeros(0))
        if self.method == "rrf":
            return self._propose_rrf()
        n = len(self.rows)
        bound_sim: float | None = None
        a_idx = np.zeros(0, np.int64)
        if self.everything:
            a_idx = np.arange(n)
        elif self.method != "lexical":
            if self.m_a >= n:
                a_idx = np.arange(n)
            else:
                part = np.argpartition(-self.c32, self.m_a)
                a_idx, bound_sim = part[: self.m_a], float(self.c32[part[self.m_a]]) + TIE_MARGIN
        else:
            bound_sim = np.inf  # lexical: any cosine
        b_next: float | None = None
        b_rows = self.b_rows
        if self.method != "vector" and not self.everything and self.m_b < len(self.b_rows):
            part = np.argpartition(-self.b_score, self.m_b)
            b_rows, b_next = self.b_rows[part[: self.m_b]], float(self.b_score[part[self.m_b]])
        if self.method == "vector":
            b_rows = b_rows[:0]
        rows = np.union1d(self.rows[a_idx], b_rows)
        cos = self.exact(rows)
        ok = np.isfinite(cos)
        rows, cos = rows[ok], cos[ok]
        if len(cos):
            self.mn, self.mx = min(self.mn, float(cos.min())), max(self.mx, float(cos.max()))
        bound = None if bound_sim is None else Bound(bound_sim, b_next)
        return Candidates(rows, cos, self.lex.of(rows), self.mn, self.mx, bound=bound)

    def _propose_rrf(self) -> Candidates:
        n, nl = len(self.rows), len(self.l_rows)
        a = self.order[: self.m_a]
        b_rows = self.l_rows[self.l_order[: self.m_b]]
        rows = np.union1d(self.rows[a], b_rows[np.isin(b_rows, self.rows)])
        pos = np.searchsorted(self.rows, rows)
        lpos = np.minimum(np.searchsorted(self.l_rows, rows), max(nl - 1, 0))
        lrank = np.where(self.l_rows[lpos] == rows, self.lrank[lpos], 0) if nl else np.zeros(len(rows), np.int64)
        bound = None
        if self.m_a < n:
            bound = Bound(float(self.cos[self.order[self.m_a]]), None, self.m_a + 1,
                          self.m_b + 1 if self.m_b < nl else None)
        return Candidates(rows, self.cos[pos], self.lex.of(rows), vector_rank=self.vrank[pos], lexical_rank=lrank,
                          bound=bound)

    def widen(self, ranked: Ranked, top_k: int) -> None:
        if self.method == "lexical" and self.m_b >= len(self.b_rows):
            self.everything = True  # fewer matches than top_k: the rest tie at 0 by memory_id
        elif self.method == "weighted" and not ranked.vector_leg_limits(top_k) and self.m_b < len(self.b_rows):
            self.m_b *= 2
        else:
            self.m_a, self.m_b = self.m_a * 2, self.m_b * 2


def block_cosines(ix: SnapshotIndex, lo: int, hi: int, qn: np.ndarray, mapped: bool) -> np.ndarray:
    """float32-accurate cosines of a whole block (NaN for zero vectors)."""
    q32 = qn.astype(np.float32)
    out = np.empty(hi - lo)
    for a in range(lo, hi, SCAN_CHUNK):
        b = min(hi, a + SCAN_CHUNK)
        block = ix.range_vectors(a, b, mapped)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[a - lo : b - lo] = (block @ q32).astype(np.float64) / ix.norm[a:b]
    out[ix.norm[lo:hi] <= 0] = np.nan
    return out


class HybridSearcher:
    """Answers recall (every fusion) from a SnapshotIndex: candidates from the index, scores from
    the snapshot's rank statement."""

    def __init__(self, index: SnapshotIndex, fusion: Fusion, lexicon: Lexicon, ranker: Ranker) -> None:
        if fusion.method not in FUSIONS:
            raise ValueError(f"not a fusion: {fusion.method}")
        self.index = index
        self.fusion = fusion
        self.lexicon = lexicon
        self.ranker = ranker
        self.postings = TermPostings(index.folder, index.users) if fusion.method != "vector" else None

    def search(self, con: duckdb.DuckDBPyConnection, user_id: str, vectors: np.ndarray,
               texts: Sequence[str | None] | None, top_k: int, min_sim: float,
               kinds: Sequence[str] | None) -> list[list[Hit]]:
        """Top ``top_k`` per intent, the compiled statement's answer. Raises Unserved."""
        ix, method = self.index, self.fusion.method
        q64 = np.asarray(vectors, dtype=np.float64).reshape(-1, ix.dim)
        lo, hi = ix.block(user_id)
        allowed = self._allowed(kinds)
        if hi == lo or not allowed.any() or top_k <= 0:
            return [[] for _ in q64]
        big = user_id in ix.meta["ivf"]
        if big and method == "rrf":
            raise Unserved("rrf needs exact global vector ranks")
        try:
            lex = self._lexical(con, user_id, texts if method != "vector" else None, len(q64))
        except LookupError as exc:
            raise Unserved(str(exc)) from None
        legs: list[Any] = []
        for q, lx in zip(q64, lex):
            qn = q / np.linalg.norm(q)
            if big:
                legs.append(IvfLegs(ix, method, user_id, lo, hi, qn, lx, top_k, allowed))
            else:
                legs.append(ExactLegs(ix, method, lo, hi, qn, lx, top_k, allowed, mapped=True))
        out: list[list[Hit]] = [[] for _ in q64]
        pending = list(range(len(q64)))
        while pending:
            proposals = []
            for i in pending:
                p = legs[i].propose()
                if p is None:  # past max_share: the block scanned exactly
                    legs[i] = ExactLegs(ix, method, lo, hi, legs[i].qn, lex[i], top_k, allowed, mapped=False)
                    p = legs[i].propose()
                proposals.append(p)
            ranked = self.ranker.rank(con, ix, user_id, proposals, top_k, min_sim)
            still = []
            for i, r in zip(pending, ranked):
                if r.settled(top_k):
                    out[i] = r.hits
                else:
                    legs[i].widen(r, top_k)
                    still.append(i)
            pending = still
        return out

    def _allowed(self, kinds: Sequence[str] | None) -> np.ndarray:
        """Kind codes in scope, as the compiled statement's scoped_memories (a NULL kind is in
        scope only without a filter, and then only if episodes are recalled by default)."""
        names = self.index.kinds
        allowed = np.zeros(len(names), dtype=bool)
        if kinds is None:
            allowed[:] = True
            if not self.fusion.episodes_by_default:
                allowed[[i for i, k in enumerate(names) if k is None or k == "episode"]] = False
        else:
            allowed[[names.index(k) for k in set(kinds) if k in names]] = True
        return allowed

    def _lexical(self, con: duckdb.DuckDBPyConnection, user_id: str, texts: Sequence[str | None] | None,
                 n: int) -> list[Lexical]:
        """Per intent: BM25 of the user's memories matching the query's terms (none for a
        precomputed vector without text, or the vector fusion)."""
        key = user_id.encode()
        u = int(np.searchsorted(self.index.users, key))
        out = []
        for i in range(n):
            text = texts[i] if texts is not None and i < len(texts) else None
            terms = tokenize(text, self.lexicon, con) if text is not None else []
            if not terms or self.postings is None:
                out.append(Lexical(np.zeros(0, np.int64), np.zeros(0)))
                continue
            rows, score = self.postings.scores(u, terms, self.lexicon.k1, self.lexicon.b)
            out.append(Lexical(rows, score))
        return out


def fusion_of(rows: dict[str, dict[str, Any]]) -> tuple[Fusion, Lexicon, Ranker] | None:
    """The Fusion, Lexicon and Ranker of a snapshot's recall_queries rows (by query_name), or None
    for a snapshot published before they were (then recall runs as compiled)."""
    try:
        row = rows["recall"]
        fusion = Fusion(str(row["fusion_method"]), float(row["fusion_vector_weight"]), float(row["lexical_saturation"]),
                        float(row["fusion_rrf_k"]), bool(row["recall_episodes_by_default"]))
        lexicon = Lexicon(float(row["lexical_k1"]), float(row["lexical_b"]), frozenset(row["lexical_stopwords"]),
                          str(rows["tokenize"]["sql_text"]))
        return fusion, lexicon, Ranker(str(rows["rank"]["sql_text"]))
    except (KeyError, TypeError, ValueError):
        return None
