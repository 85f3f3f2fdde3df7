"""The shipped hybrid fusions from the serving index: the compiled recall statement's answer
(macros/recall.sql ``recall_sql`` is the spec) without scanning the user's memories.

The score is not written here: it is the snapshot's ``recall_score(recall_relevance(..),
recall_factor(..))`` (macros/recall.sql), rendered for numpy by the build and evaluated through
``SnapshotIndex.formula`` (recall_shim/serving/formula.py) on the candidates' inputs: cos (clipped
to [mn, mx], the min / max cosine over the user's scoped memories), cos_min = mn, cos_max = mx,
bm25 (0 without a lexical match), vector_rank and lexical_rank (NaN without a match); the factor
per row is ``SnapshotIndex.factor`` (the factor's to_assistant false), or ``factor_said`` for an
intent whose text asks what the assistant said (to_assistant true: var assistant_question_pattern
on the lower-cased text, as the statement's ``addressed``), chosen per intent, made per
request for a question that asks for a slot or the current state (recall_shim/serving/asked.py;
exactly scanned users only: an IVF user's such question runs as compiled), and the final score
the conversation lift of that score (recall_shim/serving/lift.py: which rows it scores, and the
bound it takes). This module
proposes candidates and bounds the rest:
threshold on raw cosine, kind filter, NULL/zero/NaN vectors never rank, ties by memory_id.

The lexical leg comes from the index's term postings (recall_shim/serving/terms.py: the snapshot's
memory_term_index / memory_term_stats as arrays, BM25 as the ``bm25_term`` macro, query terms as
the ``tokenize`` macro; it reads only the user's postings of the query's terms; the snapshot's
compiled ``lexical`` statement is the same leg in SQL, used by the tests as its spec). The vector
leg comes from the index:

- a user scanned exactly (at most ``min_rows`` memories): float32 cosines of the whole block,
  approximate scores, then the float64 re-rank of everything near the k-th score. Exact (rrf too).
- a user with an IVF: mx is the best IVF hit, mn the best hit of the negated query (probing
  MIN_PROBES x as many lists; both also bounded by every candidate's exact cosine). Candidates are
  the top IVF hits by cosine (set A, worst cosine c_A) and the top lexical matches by BM25 (set B,
  next BM25 b_B); both are scored exactly. The score is non-decreasing in cosine and bm25
  (formula.py), so every memory outside A and B scores at most the score at (max(c_A, mn), b_B)
  with the user's largest factor (of the intent's factor array); once that bound is below the k-th score (or c_A is below the
  threshold) the answer is final; otherwise the set whose leg adds more to that bound is doubled,
  and past ``max_share`` of the user's memories the block is scanned exactly.
  Only the IVF's probe recall is approximate (measured: benchmarks/recall_speed).
  rrf needs the exact global vector rank of every lexical match, which an IVF cannot give: for
  IVF users it is not served here (the caller runs the compiled statement). So is ``lexical``
  when fewer than top_k memories match a query term (the rest rank by memory_id at score 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import duckdb
import numpy as np

from recall_shim.serving.formula import near_top
from recall_shim.serving.index import SCAN_CHUNK, TIE_MARGIN, Hit, SnapshotIndex, row_dots
from recall_shim.serving.index_ivf import EMPTY_ROWS, load_faiss, valid_hits
from recall_shim.serving.lookup import in_sorted, positions, values_at
from recall_shim.serving.fusion import HYBRID_FUSIONS, Fusion
from recall_shim.serving.asked import AskedQuestions, question_factor
from recall_shim.serving.terms import Lexicon, TermPostings, tokenize
from recall_shim.serving.lift import final_bound, rank_lifted, rank_screened_lifted, widen_candidates

MIN_PROBES = 2  # the negated-query search (the minimum cosine) probes this many times the lists


class Unserved(Exception):
    """This request is not answered from the index; the caller runs the compiled statement."""


@dataclass
class _Lexical:
    """One intent's lexical matches in the user's block: rows ascending, their BM25."""

    rows: np.ndarray
    score: np.ndarray

    def of(self, rows: np.ndarray) -> np.ndarray:
        return values_at(self.rows, self.score, rows)


class HybridSearcher:
    """Answers ``weighted`` / ``lexical`` / ``rrf`` recall from a SnapshotIndex plus the snapshot's
    compiled lexical statement."""

    def __init__(self, index: SnapshotIndex, fusion: Fusion, lexicon: Lexicon) -> None:
        if fusion.method not in HYBRID_FUSIONS:
            raise ValueError(f"not a hybrid fusion: {fusion.method}")
        self.index = index
        self.fusion = fusion
        self.lexicon = lexicon
        self.postings = TermPostings(index.folder, index.users)
        self._timed = re.compile(fusion.time_scope_pattern) if fusion.time_scope_pattern else None
        self._asked = AskedQuestions(fusion.slot_questions, fusion.current_question_pattern,
                                     fusion.assistant_question_pattern)

    # --- public ---------------------------------------------------------------------------

    def search(self, con: duckdb.DuckDBPyConnection, user_id: str, vectors: np.ndarray,
               texts: Sequence[str | None] | None, top_k: int, min_sim: float,
               kinds: Sequence[str] | None) -> list[list[Hit]]:
        """Top ``top_k`` per intent, like the compiled statement. Raises Unserved."""
        ix = self.index
        q64 = np.asarray(vectors, dtype=np.float64).reshape(-1, ix.dim)
        lo, hi = ix.block(user_id)
        allowed = self.allowed_kinds(kinds)
        if hi == lo or not allowed.any() or top_k <= 0:
            return [[] for _ in q64]
        big = user_id in ix.meta["ivf"]
        if big and self.fusion.method == "rrf":
            raise Unserved("rrf needs exact global vector ranks")
        self.check_time_scope(texts)
        text_of = [texts[i] if texts is not None and i < len(texts) else None for i in range(len(q64))]
        asked = [(self.asked_slots(t), self.asks_current(t)) for t in text_of]
        if any(s or c for s, c in asked) and (big or ix.slot is None or ix.said is None):
            # an IVF's bounds take the user's factor range without these weights; an index written
            # before slot.npy / said.npy holds no slots or times
            raise Unserved("a question that asks for a slot or the current state runs as compiled for this user")
        if ix.formula.lifted and ix.windows is None:
            raise Unserved("an index written before the conversation lift: run as compiled")
        try:
            lex = [self.with_context(lx) for lx in self._lexical(con, user_id, texts, len(q64))]
        except LookupError as exc:
            raise Unserved(str(exc)) from None
        out = []
        for i, (q, lx) in enumerate(zip(q64, lex)):
            qn = q / np.linalg.norm(q)
            fac = question_factor(ix, lo, hi, self.asks_assistant(text_of[i]), *asked[i], allowed)
            if big:
                out.append(self._search_ivf(user_id, lo, hi, qn, lx, top_k, min_sim, allowed, fac))
            else:
                out.append(self._exact(lo, hi, qn, lx, top_k, min_sim, allowed, fac, mapped=True))
        return out

    def check_time_scope(self, texts: Sequence[str | None] | None) -> None:
        """Unserved when a question may name a time (the statement's time window weighs it; the
        index holds no dates to weigh by): it runs as compiled (docs/recall.md "Time-scoped recall")."""
        if self._timed is not None and any(t is not None and self._timed.search(t.lower()) for t in texts or ()):
            raise Unserved("a question that names a time runs as compiled")

    def asked_slots(self, text: str | None) -> frozenset[str]:
        """The slots a question asks for (recall_shim/serving/asked.py)."""
        return self._asked.slots(text)

    def asks_current(self, text: str | None) -> bool:
        """Does a question ask for the current state (asked.py)?"""
        return self._asked.current(text)

    def asks_assistant(self, text: str | None) -> bool:
        """Does the question ask what the assistant said (var assistant_question_pattern on the
        lower-cased text, as the compiled statement's ``addressed``)? Never for a precomputed vector."""
        return self._asked.assistant(text)

    # --- pieces ---------------------------------------------------------------------------

    def allowed_kinds(self, kinds: Sequence[str] | None) -> np.ndarray:
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
                 n: int) -> list[_Lexical]:
        """Per intent: BM25 of the user's memories matching the query's terms (none for a
        precomputed vector without text)."""
        key = user_id.encode()
        u = int(np.searchsorted(self.index.users, key))
        out = []
        for i in range(n):
            text = texts[i] if texts is not None and i < len(texts) else None
            terms = tokenize(text, self.lexicon, con) if text is not None else []
            if not terms:
                out.append(_Lexical(np.zeros(0, np.int64), np.zeros(0)))
                continue
            rows, score = self.postings.scores(u, terms, self.lexicon.k1, self.lexicon.b)
            out.append(_Lexical(rows, score))
        return out

    def with_context(self, lex: _Lexical) -> _Lexical:
        """The lexical leg with the turn context's shares (recall_shim/serving/context.py): what
        the compiled statement's lexical_leg sums, before the kind filter (applied to the rows)."""
        return _Lexical(*self.index.turns.add(lex.rows, lex.score))

    def score_rows(self, rows: np.ndarray, cos: np.ndarray, ls: np.ndarray, mn: float, mx: float,
               fac: np.ndarray) -> np.ndarray:
        """The snapshot's score of ``rows`` (cosine clipped to [mn, mx]: mn and mx are cosines of
        the rows themselves, the clip only removes float64 rounding between two matrix products
        of the same rows; with NaN mn / mx, a fusion without the cosine, it has no effect)."""
        f = self.index.formula
        if mn <= mx:
            cos = np.clip(cos, mn, mx)
        return f.score(f.relevance(cos=cos, cos_min=mn, cos_max=mx, bm25=ls), fac[rows])

    def rank_hits(self, rows: np.ndarray, cos: np.ndarray, score: np.ndarray, ls: np.ndarray, top_k: int,
              min_sim: float) -> list[Hit]:
        """Rank (unique) rows with exact cosines and scores: threshold, score desc, memory_id."""
        ix = self.index
        ok = np.isfinite(cos) & (cos >= min_sim) & np.isfinite(score)
        r, c, s, lsc = rows[ok], cos[ok], score[ok], ls[ok]
        ids = ix.memory_id[r]
        order = np.lexsort((ids, -s))[:top_k]
        return [Hit(int(r[i]), ids[i].decode(), ix.kinds[ix.kind[r[i]]], float(c[i]), float(ix.strength[r[i]]),
                          float(s[i]), float(lsc[i])) for i in order]

    def block_cosines(self, lo: int, hi: int, qn: np.ndarray, mapped: bool) -> np.ndarray:
        """float32-accurate cosines of a whole block (NaN for zero vectors)."""
        ix = self.index
        q32 = qn.astype(np.float32)
        out = np.empty(hi - lo)
        for a in range(lo, hi, SCAN_CHUNK):
            b = min(hi, a + SCAN_CHUNK)
            block = ix.range_vectors(a, b, mapped)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[a - lo : b - lo] = (block @ q32).astype(np.float64) / ix.norm[a:b]
        out[ix.norm[lo:hi] <= 0] = np.nan
        return out

    def _exact(self, lo: int, hi: int, qn: np.ndarray, lex: _Lexical, top_k: int, min_sim: float,
               allowed: np.ndarray, fac: np.ndarray, mapped: bool) -> list[Hit]:
        """The whole block: float32 screening of every scoped memory, float64 re-rank."""
        ix, f = self.index, self.fusion
        approx = self.block_cosines(lo, hi, qn, mapped)
        in_scope = allowed[ix.kind[lo:hi]]
        rows = lo + np.flatnonzero(in_scope & np.isfinite(approx))
        if not len(rows):
            return []
        c32 = approx[rows - lo]
        exact = lambda r: ix._cosines(r, qn, mapped)  # noqa: E731
        if f.method == "rrf":
            return self._rrf(lo, hi, rows, exact(rows), lex, in_scope, top_k, min_sim, fac)
        mx = float(np.max(exact(rows[c32 >= c32.max() - TIE_MARGIN])))
        mn = float(np.min(exact(rows[c32 <= c32.min() + TIE_MARGIN])))
        return self.rank_screened(rows, c32, exact, lex.of(rows), mn, mx, fac, top_k, min_sim)

    def rank_screened(self, rows: np.ndarray, c32: np.ndarray, exact: Any, ls: np.ndarray, mn: float, mx: float,
                      fac: np.ndarray, top_k: int, min_sim: float) -> list[Hit]:
        """Top k of ``rows`` screened by float32 cosines ``c32`` (within TIE_MARGIN of ``exact(rows)``;
        the score is non-decreasing in cosine): only rows whose score at c32 + margin reaches the k-th at c32 - margin."""
        upper = self.score_rows(rows, c32 + TIE_MARGIN, ls, mn, mx, fac)
        elig = np.flatnonzero((c32 >= min_sim - TIE_MARGIN) & np.isfinite(upper))
        formula = self.index.formula
        if formula.lifted:
            return rank_screened_lifted(self, rows, c32, exact, ls, mn, mx, fac, top_k, min_sim, upper, elig)
        if len(elig) > top_k:
            lower = self.score_rows(rows[elig], c32[elig] - TIE_MARGIN, ls[elig], mn, mx, fac)
            elig = elig[near_top(lower, upper[elig], top_k)]
        keep = rows[elig]
        cos = exact(keep)
        return self.rank_hits(keep, cos, self.score_rows(keep, cos, ls[elig], mn, mx, fac), ls[elig], top_k, min_sim)

    def _rrf(self, lo: int, hi: int, rows: np.ndarray, cos: np.ndarray, lex: _Lexical, in_scope: np.ndarray,
             top_k: int, min_sim: float, fac: np.ndarray) -> list[Hit]:
        """rrf over an exactly scanned block: vector ranks over every scoped memory with a vector,
        lexical ranks over every scoped lexical match (with or without a vector)."""
        ix, formula = self.index, self.index.formula
        ok = np.isfinite(cos)
        rows, cos = rows[ok], cos[ok]
        if not len(rows):
            return []
        vrank = np.empty(len(rows))
        vrank[np.lexsort((ix.memory_id[rows], -cos))] = np.arange(1, len(rows) + 1)
        lsel = in_scope[lex.rows - lo] if len(lex.rows) else np.zeros(0, bool)
        lrows, lscore = lex.rows[lsel], lex.score[lsel]
        lrank = np.empty(len(lrows))
        lrank[np.lexsort((ix.memory_id[lrows], -lscore))] = np.arange(1, len(lrows) + 1)
        lexical_rank = np.full(len(rows), np.nan)  # NaN: no lexical match (NULL in SQL)
        i = positions(lrows, rows)
        lexical_rank[i >= 0] = lrank[i[i >= 0]]
        ls = lex.of(rows)
        rel = formula.relevance(cos=cos, cos_min=float(cos.min()), cos_max=float(cos.max()), bm25=ls,
                                vector_rank=vrank, lexical_rank=lexical_rank)
        if formula.lifted:  # every scoped row is scored: each one's near rows are among them
            return rank_lifted(self, rows, cos, formula.score(rel, fac[rows]), ls, rows, top_k, min_sim)
        return self.rank_hits(rows, cos, formula.score(rel, fac[rows]), ls, top_k, min_sim)

    def _search_ivf(self, user_id: str, lo: int, hi: int, qn: np.ndarray, lex: _Lexical, top_k: int,
                    min_sim: float, allowed: np.ndarray, fac: np.ndarray) -> list[Hit]:
        ix, f = self.index, self.fusion
        faiss = load_faiss()
        faiss.omp_set_num_threads(1)
        ivf = ix._ivf_of(user_id)
        s = ix.settings
        f_max, f_min = ix.factor_range(user_id, fac)
        block_ids = ix.id64[lo:hi]
        limit = s.max_share * (hi - lo)
        q32 = qn.astype(np.float32).reshape(1, -1)
        in_scope = lambda r: allowed[ix.kind[r]] & (ix.norm[r] > 0) & np.isfinite(fac[r])  # noqa: E731
        tail_all = ix.tail_of(user_id)
        # the tail (rows the IVF does not hold as is) is scanned exactly: float32 cosines of all of
        # it, its best rows by cosine join A (as many as A's IVF candidates), the rest is bounded by
        # the next best (t_cut); its min and max cosine bound mn and mx exactly
        t_sel = np.flatnonzero(in_scope(tail_all)) if len(tail_all) else EMPTY_ROWS
        t32 = ix.tail_cos32(user_id, qn)[t_sel] if len(t_sel) else np.zeros(0)
        t_mn = t_mx = np.nan
        if len(t_sel):
            t_mn = float(ix.tail_exact(user_id, t_sel[t32 <= t32.min() + TIE_MARGIN], qn).min())
            t_mx = float(ix.tail_exact(user_id, t_sel[t32 >= t32.max() - TIE_MARGIN], qn).max())

        def tail_part(k: int) -> tuple[np.ndarray, np.ndarray, float]:
            if k >= len(t_sel):
                return tail_all[t_sel], ix.tail_exact(user_id, t_sel, qn), -np.inf
            part = np.argpartition(-t32, k)
            keep = np.sort(t_sel[part[:k]])
            return tail_all[keep], ix.tail_exact(user_id, keep, qn), float(t32[part[k]]) + TIE_MARGIN

        def cosines(rows: np.ndarray) -> np.ndarray:  # exact: the IVF's unit vectors in RAM, the tail's too
            if not len(rows):
                return np.zeros(0)
            out = np.empty(len(rows))
            is_tail = in_sorted(tail_all, rows)
            if is_tail.any():
                out[is_tail] = ix.tail_exact(user_id, np.searchsorted(tail_all, rows[is_tail]), qn)
            held = rows[~is_tail]
            if len(held):
                out[~is_tail] = row_dots(ivf.reconstruct_batch(np.ascontiguousarray(ix.id64[held])), qn)
            return out

        def ivf_search(vec: np.ndarray, k: int, nprobe: int) -> tuple[np.ndarray, np.ndarray, bool, float]:
            """Valid IVF hits (rows, exact cosines with the query), whether the IVF is exhausted,
            and the worst cosine of the k retrieved (inf if fewer): it bounds every IVF row not
            retrieved. Hits whose memory is gone or changed (in the tail) are dropped."""
            params = faiss.SearchParametersIVF(nprobe=min(nprobe, ivf.nlist))
            _, found = ivf.search(vec, k, params=params)
            ids = found[0][found[0] >= 0]
            cos = row_dots(ivf.reconstruct_batch(ids), qn) if len(ids) else np.zeros(0)
            rows, valid = valid_hits(block_ids, lo, ids, tail_all)
            worst = float(cos.min()) if len(ids) == k and len(ids) else np.inf
            return rows[valid], cos[valid], len(ids) < k and nprobe >= ivf.nlist, worst

        def top_lexical(m: int) -> tuple[np.ndarray, float]:
            """The m best lexical matches (in scope) and an upper bound of every other's BM25."""
            if m >= len(lex.rows):
                rows, bound = lex.rows, 0.0
            else:
                part = np.argpartition(-lex.score, m)
                rows, bound = lex.rows[part[:m]], float(lex.score[part[m]])
            return np.sort(rows[in_scope(rows)]), bound

        k_cand = m = max(s.candidates, 8 * top_k)
        nprobe = s.nprobe
        mn = mx = np.nan
        k_mn = max(16, 2 * top_k)
        while True:
            if k_cand > limit or nprobe > ivf.nlist * s.max_share and nprobe < ivf.nlist:
                return self._exact(lo, hi, qn, lex, top_k, min_sim, allowed, fac, mapped=False)
            if f.method == "weighted":
                i_rows, i_cos, a_all, c_a = ivf_search(q32, k_cand, nprobe)
                t_rows, t_cos, t_cut = tail_part(k_cand)
                a_rows, a_cos = np.concatenate([i_rows, t_rows]), np.concatenate([i_cos, t_cos])
                a_all, c_a = a_all and t_cut == -np.inf, max(c_a if not a_all else -np.inf, t_cut)
            else:  # lexical: only lexical matches can score above 0
                a_rows, a_cos, a_all, c_a = np.zeros(0, np.int64), np.zeros(0), False, np.inf
            a_ok = in_scope(a_rows)
            if f.method == "weighted":
                if not a_ok.any():
                    if a_all:
                        return []  # no scoped memory has a vector
                    k_cand, nprobe = k_cand * 2, nprobe * 2
                    continue
                mx = float(np.nanmax([a_cos[a_ok].max(), t_mx]))
                # the minimum cosine: the best hit of the negated query, probing more lists than the
                # candidate search (a few nearest hits are cheap) and more as the search widens; the
                # tail's exact min (t_mn) bounds it too
                found_mn = np.nan
                while np.isnan(found_mn):
                    n_rows, n_cos, n_all, _ = ivf_search(-q32, k_mn, MIN_PROBES * nprobe)
                    n_ok = in_scope(n_rows)
                    if n_ok.any():
                        found_mn = float(n_cos[n_ok].min())
                    elif n_all and len(t_sel):
                        found_mn = t_mn  # the IVF holds no scoped memory: the tail does
                    elif n_all or k_mn > limit:
                        return self._exact(lo, hi, qn, lex, top_k, min_sim, allowed, fac, mapped=False)
                    else:
                        k_mn *= 2
                mn = found_mn if np.isnan(mn) else min(mn, found_mn)
                mn = mn if np.isnan(t_mn) else min(mn, t_mn)
            b_rows, b_next = top_lexical(m)
            extra = np.setdiff1d(b_rows, a_rows[a_ok], assume_unique=True)
            rows = np.concatenate([a_rows[a_ok], extra])
            cos = np.concatenate([a_cos[a_ok], cosines(extra)])
            owners = None
            if ix.formula.lifted:  # the candidates' near rows and theirs are scored too (lift.py)
                assert ix.windows is not None
                owners, more = widen_candidates(ix.windows, rows, in_scope)
                rows, cos = np.concatenate([rows, more]), np.concatenate([cos, cosines(more)])
            if f.method == "weighted" and len(cos):  # every scoped cosine seen bounds min and max
                mn, mx = min(mn, float(cos.min())), max(mx, float(cos.max()))
            ls = lex.of(rows)
            if owners is not None:
                by = np.argsort(rows)
                rows, cos, ls = rows[by], cos[by], ls[by]
                hits = rank_lifted(self, rows, cos, self.score_rows(rows, cos, ls, mn, mx, fac), ls, owners, top_k,
                                   min_sim)
            else:
                hits = self.rank_hits(rows, cos, self.score_rows(rows, cos, ls, mn, mx, fac), ls, top_k, min_sim)
            kth = hits[-1].score if len(hits) == top_k else -np.inf
            if f.method == "lexical":
                bound = final_bound(ix.formula, ix.formula.bound(float(ix.formula.relevance(bm25=b_next)), f_min, f_max))
                if kth - TIE_MARGIN > bound:
                    return hits
                if m >= len(lex.rows):  # fewer than top_k lexical matches: the rest tie at 0 by memory_id
                    raise Unserved("lexical fusion needs memories without a lexical match")
                m *= 2
                continue
            # weighted: outsiders of A have cos <= c_A, outsiders of B have bm25 <= b_next
            if a_all:
                return hits  # A is every memory with a vector
            if c_a < min_sim - TIE_MARGIN:
                return hits  # every memory outside A is below the threshold
            # the formula at the outsiders' best inputs; and at each leg's alone (which set to widen)
            c_top = max(c_a, mn)
            at = ix.formula.relevance(cos=np.array([c_top, mn, c_top, mn]), cos_min=mn, cos_max=mx,
                                      bm25=np.array([b_next, 0.0, 0.0, b_next]))
            vec_part, lex_part = float(at[2] - at[1]), float(at[3] - at[1])
            if kth - TIE_MARGIN > final_bound(ix.formula, ix.formula.bound(float(at[0]), f_min, f_max)):
                return hits
            if lex_part > vec_part and m < len(lex.rows):
                m *= 2
            else:
                k_cand, nprobe = k_cand * 2, nprobe * 2
