"""The conversation lift on the serving index's paths (recall_shim/serving/hybrid.py): the final
score of a memory is the snapshot's published lift expression (macros/recall.sql ``recall_lift``,
formula.py) of its score and of the best score among the ranked memories near it in its
conversation (recall_shim/serving/window.py). Nothing of the rule is written here: these
functions choose which rows to score exactly so that the answer equals the compiled statement's,
and bound what they did not score. The lift is non-decreasing in both inputs, and a memory is near
itself (best >= score)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from recall_shim.serving.formula import RecallFormula, near_top
from recall_shim.serving.index import TIE_MARGIN, Hit
from recall_shim.serving.lookup import positions
from recall_shim.serving.window import TurnWindows, best_near

__all__ = ["final_bound", "rank_lifted", "rank_screened_lifted", "widen_candidates"]

_UNSURE = -1e300  # the lower bound of a row that may not be ranked at all (finite: near_top keeps it)


def final_bound(formula: RecallFormula, bound: float) -> float:
    """The largest final score of a memory whose score, and every near memory's, is at most
    ``bound``."""
    return float(formula.lift(np.float64(bound), np.float64(bound)))


def rank_lifted(searcher: Any, rows: np.ndarray, cos: np.ndarray, score: np.ndarray, ls: np.ndarray,
                owners: np.ndarray, top_k: int, min_sim: float) -> list[Hit]:
    """Rank ``owners`` (a subset of ``rows``, both ascending; every row near an owner is in
    ``rows``, exactly scored) by their final score: the lift of their score and of the best score
    among the ranked rows near them (threshold passed, finite score)."""
    formula, windows = searcher.index.formula, searcher.index.windows
    ranked = np.isfinite(cos) & (cos >= min_sim) & np.isfinite(score)
    at = positions(rows, owners)
    final = formula.lift(score[at], best_near(windows, owners, rows[ranked], score[ranked]))
    return searcher.rank_hits(owners, cos[at], final, ls[at], top_k, min_sim)


def rank_screened_lifted(searcher: Any, rows: np.ndarray, c32: np.ndarray, exact: Callable[[np.ndarray], np.ndarray],
                         ls: np.ndarray, mn: float, mx: float, fac: np.ndarray, top_k: int, min_sim: float,
                         upper: np.ndarray, elig: np.ndarray) -> list[Hit]:
    """HybridSearcher.rank_screened with the lift: a row's final-score bounds are the lift of its
    score bounds and of its near rows' (every row that may pass the threshold lends its upper
    bound, every row that surely passes its lower); what may reach the top k is then scored
    exactly together with every row near it."""
    formula, windows = searcher.index.formula, searcher.index.windows
    if len(elig) > top_k:
        lower = searcher.score_rows(rows, c32 - TIE_MARGIN, ls, mn, mx, fac)
        sure = np.flatnonzero((c32 >= min_sim + TIE_MARGIN) & np.isfinite(lower))
        e = rows[elig]
        f_up = formula.lift(upper[elig], best_near(windows, e, e, upper[elig]))
        # a row that may miss the threshold has no lower bound: it never sets the k-th
        surely = np.isin(elig, sure)
        f_low = formula.lift(lower[elig], best_near(windows, e, rows[sure], lower[sure]))
        elig = elig[near_top(np.where(surely, f_low, _UNSURE), f_up, top_k)]
    at = positions(rows, windows.widen(rows[elig]))
    ext = at[at >= 0]  # positions in rows of the kept rows and of every scoped row near them
    cos = exact(rows[ext])
    score = searcher.score_rows(rows[ext], cos, ls[ext], mn, mx, fac)
    return rank_lifted(searcher, rows[ext], cos, score, ls[ext], rows[elig], top_k, min_sim)


def widen_candidates(windows: TurnWindows, rows: np.ndarray,
                     in_scope: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """An IVF user's candidates ``rows`` widened for the lift: (owners, more). Owners are the
    candidates and the scoped rows near them, ascending: each owner's near rows are owners or
    ``more`` (the scoped rows near those, not yet in ``rows``), so once ``more`` is scored too
    every owner's final score is exact. A memory that is no owner has no candidate near it: its
    final score is at most ``final_bound`` of the candidates' bound."""
    owners = np.sort(rows)
    near = windows.widen(owners)
    near = near[in_scope(near)] if len(near) else near
    far = windows.widen(near)
    far = far[in_scope(far)] if len(far) else far
    owners = np.union1d(owners, near)
    return owners, np.setdiff1d(np.union1d(near, far), rows)
