"""One intent's legs for a user with an IVF (recall_shim/serving/index_ivf.py): candidates by cosine from
the IVF and its tail (set A), the best lexical matches (set B), the min / max cosine, and the
bound of everything else. Scores come from the rank statement (recall_shim/serving/rank.py).

- A: the top ``k_cand`` IVF hits by cosine (exact cosines from the IVF's unit vectors) and the
  tail's best rows by float32 cosine (the tail is scanned exactly); c_A = the worst IVF hit's
  cosine (it bounds every IVF row not retrieved) or the tail's next cosine, whichever is larger.
- mx = the best cosine seen; mn = the best hit of the negated query, probing MIN_PROBES x as many
  lists (both also bounded by every candidate's exact cosine and the tail's exact extremes).
- B: the top ``m`` lexical matches in scope; b_B = the next BM25.
Only the IVF's probe recall is approximate (measured: benchmarks/recall_speed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from recall_shim.serving.index import TIE_MARGIN, SnapshotIndex, row_dots
from recall_shim.serving.index_ivf import EMPTY_ROWS, in_sorted, valid_hits
from recall_shim.serving.rank import Bound, Candidates, Lexical, Ranked, Unserved

MIN_PROBES = 2  # the negated-query search (the minimum cosine) probes this many times the lists


def first_candidates(index: SnapshotIndex, top_k: int) -> int:
    """Candidates per leg on the first try."""
    return max(index.settings.candidates, 8 * top_k)


class IvfLegs:
    def __init__(self, ix: SnapshotIndex, method: str, user_id: str, lo: int, hi: int, qn: np.ndarray, lex: Lexical,
                 top_k: int, allowed: np.ndarray) -> None:
        self.ix, self.method, self.user_id, self.lo, self.qn, self.lex = ix, method, user_id, lo, qn, lex
        import faiss  # imported on first use, as everywhere in the shim

        self.faiss: Any = faiss
        self.faiss.omp_set_num_threads(1)  # one query at a time: threads cost more than they give
        self.ivf = ix.ivf_of(user_id)
        self.s = ix.settings
        self.allowed = allowed
        self.block_ids = ix.id64[lo:hi]
        self.limit = self.s.max_share * (hi - lo)
        self.q32 = qn.astype(np.float32).reshape(1, -1)
        self.tail_all = ix.tail_of(user_id)
        self.k_cand = self.m = first_candidates(ix, top_k)
        self.nprobe = self.s.nprobe
        self.mn = self.mx = np.nan
        self.k_mn = max(16, 2 * top_k)
        # the tail (rows the IVF does not hold as is) is scanned exactly: float32 cosines of all of
        # it, its best rows by cosine join A (as many as A's IVF candidates), the rest is bounded by
        # the next best (t_cut); its min and max cosine bound mn and mx exactly
        t = self.tail_all
        self.t_sel = np.flatnonzero(self.in_scope(t)) if len(t) else EMPTY_ROWS
        self.t32 = ix.tail_cos32(user_id, qn)[self.t_sel] if len(self.t_sel) else np.zeros(0)
        self.t_mn = self.t_mx = np.nan
        if len(self.t_sel):
            t32 = self.t32
            self.t_mn = float(ix.tail_exact(user_id, self.t_sel[t32 <= t32.min() + TIE_MARGIN], qn).min())
            self.t_mx = float(ix.tail_exact(user_id, self.t_sel[t32 >= t32.max() - TIE_MARGIN], qn).max())

    def in_scope(self, rows: np.ndarray) -> np.ndarray:
        ix = self.ix
        return self.allowed[ix.kind[rows]] & (ix.norm[rows] > 0) & np.isfinite(ix.strength[rows])

    def tail_part(self, k: int) -> tuple[np.ndarray, np.ndarray, float]:
        ix, t_sel = self.ix, self.t_sel
        if k >= len(t_sel):
            return self.tail_all[t_sel], ix.tail_exact(self.user_id, t_sel, self.qn), -np.inf
        part = np.argpartition(-self.t32, k)
        keep = np.sort(t_sel[part[:k]])
        return self.tail_all[keep], ix.tail_exact(self.user_id, keep, self.qn), float(self.t32[part[k]]) + TIE_MARGIN

    def cosines(self, rows: np.ndarray) -> np.ndarray:
        """Exact: the IVF's unit vectors in RAM, the tail's too."""
        if not len(rows):
            return np.zeros(0)
        out = np.empty(len(rows))
        is_tail = in_sorted(self.tail_all, rows)
        if is_tail.any():
            out[is_tail] = self.ix.tail_exact(self.user_id, np.searchsorted(self.tail_all, rows[is_tail]), self.qn)
        held = rows[~is_tail]
        if len(held):
            out[~is_tail] = row_dots(self.ivf.reconstruct_batch(np.ascontiguousarray(self.ix.id64[held])), self.qn)
        return out

    def ivf_search(self, vec: np.ndarray, k: int, nprobe: int) -> tuple[np.ndarray, np.ndarray, bool, float]:
        """Valid IVF hits (rows, exact cosines with the query), whether the IVF is exhausted,
        and the worst cosine of the k retrieved (inf if fewer): it bounds every IVF row not
        retrieved. Hits whose memory is gone or changed (in the tail) are dropped."""
        ivf = self.ivf
        params = self.faiss.SearchParametersIVF(nprobe=min(nprobe, ivf.nlist))
        _, found = ivf.search(vec, k, params=params)
        ids = found[0][found[0] >= 0]
        cos = row_dots(ivf.reconstruct_batch(ids), self.qn) if len(ids) else np.zeros(0)
        rows, valid = valid_hits(self.block_ids, self.lo, ids, self.tail_all)
        worst = float(cos.min()) if len(ids) == k and len(ids) else np.inf
        return rows[valid], cos[valid], len(ids) < k and nprobe >= ivf.nlist, worst

    def top_lexical(self) -> tuple[np.ndarray, float | None]:
        """The m best lexical matches (in scope) and an upper bound of every other's BM25."""
        lex, m = self.lex, self.m
        if m >= len(lex.rows):
            rows, bound = lex.rows, None
        else:
            part = np.argpartition(-lex.score, m)
            rows, bound = lex.rows[part[:m]], float(lex.score[part[m]])
        return np.sort(rows[self.in_scope(rows)]), bound

    def _min_cosine(self) -> float | None:
        """The minimum cosine bound (None: scan exactly)."""
        found_mn = np.nan
        while np.isnan(found_mn):
            n_rows, n_cos, n_all, _ = self.ivf_search(-self.q32, self.k_mn, MIN_PROBES * self.nprobe)
            n_ok = self.in_scope(n_rows)
            if n_ok.any():
                found_mn = float(n_cos[n_ok].min())
            elif n_all and len(self.t_sel):
                found_mn = self.t_mn  # the IVF holds no scoped memory: the tail does
            elif n_all or self.k_mn > self.limit:
                return None
            else:
                self.k_mn *= 2
        return found_mn

    def propose(self) -> Candidates | None:
        """This round's candidates, or None when the search passed max_share (scan exactly)."""
        s, method = self.s, self.method
        while True:
            if self.k_cand > self.limit or self.nprobe > self.ivf.nlist * s.max_share and self.nprobe < self.ivf.nlist:
                return None
            a_rows, a_cos, a_all, c_a = EMPTY_ROWS, np.zeros(0), False, np.inf
            if method != "lexical":  # lexical: any cosine, only lexical matches score above 0
                i_rows, i_cos, a_all, c_a = self.ivf_search(self.q32, self.k_cand, self.nprobe)
                t_rows, t_cos, t_cut = self.tail_part(self.k_cand)
                a_rows, a_cos = np.concatenate([i_rows, t_rows]), np.concatenate([i_cos, t_cos])
                a_all, c_a = a_all and t_cut == -np.inf, max(c_a + TIE_MARGIN if not a_all else -np.inf, t_cut)
            a_ok = self.in_scope(a_rows)
            if method != "lexical" and not a_ok.any():
                if a_all:
                    return Candidates(EMPTY_ROWS, np.zeros(0), np.zeros(0))  # no scoped memory has a vector
                self.k_cand, self.nprobe = self.k_cand * 2, self.nprobe * 2
                continue
            break
        if method == "weighted":
            self.mx = float(np.nanmax([a_cos[a_ok].max(), self.t_mx]))
            found_mn = self._min_cosine()
            if found_mn is None:
                return None
            self.mn = found_mn if np.isnan(self.mn) else min(self.mn, found_mn)
            self.mn = self.mn if np.isnan(self.t_mn) else min(self.mn, self.t_mn)
        b_rows, b_next = self.top_lexical() if method != "vector" else (EMPTY_ROWS, None)
        extra = np.setdiff1d(b_rows, a_rows[a_ok], assume_unique=True)
        rows = np.concatenate([a_rows[a_ok], extra])
        cos = np.concatenate([a_cos[a_ok], self.cosines(extra)])
        if method == "weighted" and len(cos):  # every scoped cosine seen bounds min and max
            self.mn, self.mx = min(self.mn, float(cos.min())), max(self.mx, float(cos.max()))
        bound = None if a_all else Bound(float(c_a), b_next)
        mn, mx = (self.mn, self.mx) if method == "weighted" else (0.0, 0.0)
        return Candidates(rows, cos, self.lex.of(rows), mn, mx, bound=bound)

    def widen(self, ranked: Ranked, top_k: int) -> None:
        if self.method == "lexical":
            if self.m >= len(self.lex.rows):  # fewer than top_k lexical matches: the rest tie at 0 by memory_id
                raise Unserved("lexical fusion needs memories without a lexical match")
            self.m *= 2
        elif self.method == "weighted" and not ranked.vector_leg_limits(top_k) and self.m < len(self.lex.rows):
            self.m *= 2
        else:
            self.k_cand, self.nprobe = self.k_cand * 2, self.nprobe * 2
