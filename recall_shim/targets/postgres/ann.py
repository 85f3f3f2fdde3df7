"""Indexed recall on PostgreSQL: candidates by cosine, then the exact score (docs/scaling_out.md).

Used by PgMemoryStore for the vector-only fusion (``fusion_method: vector``, the fusion DuckDB's
serving index serves too), without agent/session narrowing; everything else runs the compiled
statement. Two ways to find the candidates, by the user's current memory count:

* above ``recall_index_min_rows``: the HNSW index on ``long_term_memory`` (``LIMIT c`` with
  ``hnsw.ef_search = max(c, recall_index_ef_search)``, the user and kind filters applied after the
  index scan): approximate;
* up to it: an exact scan of that user's rows through the ``user_id`` btree (index scans, and so
  the HNSW index, are off for the query: pgvector 0.6 filters after its index scan, so a small
  user's rows are rarely among its candidates), ordered by cosine distance; or, once the
  process has read that user's memories in the current store generation, the same exact answer
  from them in memory (user_cache.py): one single-row SELECT per call.

Per intent: the nearest ``c`` memories, scored by the build's own score expressions
(macros/recall.sql rendered for numpy, recall_shim/serving/formula.py: the statement's score, not
a copy), raw-cosine threshold, ties by memory_id. The answer is accepted when the k-th score beats
what any memory outside the candidates could reach (the score at the farthest candidate's cosine
with the factor at strength 0 or 1, questions or not, the assistant's or not: the score is
non-decreasing in cosine and strength, strength lies in [0, 1]), or when that cosine is already
below the threshold, or (exact scan) when the user has no more rows; otherwise ``c`` grows 4x. The
HNSW path stops at pgvector's ef_search limit (1000), after which the call falls back to the exact
statement; the exact scan has no limit.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from recall_shim.common.sql import sql_ident
from recall_shim.serving.formula import RecallFormula
from recall_shim.targets.postgres.user_cache import UserCache, rank_entry

__all__ = ["PgAnn"]

EF_SEARCH_MAX = 1000  # pgvector's hnsw.ef_search upper limit


class PgAnn:
    """Per-store helper: index settings and per-user row counts (refreshed after each build)."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self._settings: tuple[int, int, int] | None = None
        self._counts: dict[str, int] = {}
        self.used = 0       # calls answered from the HNSW index (for benchmarks and tests)
        self.exact = 0      # calls answered by the exact scan of a small user's rows
        self.fallbacks = 0  # calls that widened to the limit and ran the exact statement
        self.cache = UserCache(schema)  # small users' memories, per store generation (user_cache.py)

    def reset(self) -> None:
        self._settings = None
        self._counts.clear()
        self.cache.reset()

    def _index_settings(self, con: Any) -> tuple[int, int, int]:
        """(min_rows, candidates, ef_search) of recall_index_settings (a store built before ef_search
        existed has no such column: 0, the candidates alone)."""
        if self._settings is None:
            row = con.execute(f'select to_jsonb(s) from {sql_ident(self.schema)}.recall_index_settings as s').fetchone()
            got = row[0] if row else {}
            self._settings = (int(got.get("min_rows", 20_000)), int(got.get("candidates", 128)),
                              int(got.get("ef_search") or 0))
        return self._settings

    def uses_hnsw(self, con: Any, user_id: str) -> bool:
        """Whether the user has more current memories than ``recall_index_min_rows`` (counted once
        per process and build): the HNSW path; else the exact scan."""
        min_rows, _, _ = self._index_settings(con)
        if user_id not in self._counts:
            self._counts[user_id] = int(con.execute(
                f'select count(*) from {sql_ident(self.schema)}.long_term_memory where user_id = %s and valid_to is null',
                [user_id]).fetchone()[0])
        return self._counts[user_id] > min_rows

    @staticmethod
    def _factor(formula: RecallFormula, strength: np.ndarray, is_question: np.ndarray,
                is_assistant: np.ndarray) -> np.ndarray:
        """The build's factor of these memories for an intent without query text (to_assistant false)."""
        return formula.factor(strength=strength, is_question=is_question, is_assistant=is_assistant, to_assistant=False)

    def cached(self, con: Any, *, user_id: str, vectors: Sequence[Sequence[float]], top_k: int, min_sim: float,
               kinds: Sequence[str] | None, episodes_by_default: bool, dim: int,
               formula: RecallFormula) -> list[tuple[Any, ...]] | None:
        """Rows shaped like the compiled statement's from the per-user cache (user_cache.py), or None
        when the user is not served by the exact scan or cannot be kept. Needs no transaction: the
        entry and the generation it was read with come from one statement."""
        if self.uses_hnsw(con, user_id):
            return None
        entry = self.cache.entry(con, user_id, dim)
        if entry is None:
            return None
        self.exact += 1
        return [(intent, rank, *hit[:7], 0.0, *hit[7])
                for intent, vec in enumerate(vectors, start=1)
                for rank, hit in enumerate(rank_entry(entry, formula, vec, top_k=top_k, min_sim=min_sim, kinds=kinds,
                                                      episodes_by_default=episodes_by_default), start=1)]

    def recall(self, con: Any, *, user_id: str, vectors: Sequence[Sequence[float]], top_k: int, min_sim: float,
               kinds: Sequence[str] | None, episodes_by_default: bool, dim: int,
               formula: RecallFormula) -> list[tuple[Any, ...]] | None:
        """Rows shaped like the compiled statement's, or None when the caller must run it. Runs in
        the caller's transaction (its settings are ``set local``)."""
        _, first, ef_floor = self._index_settings(con)
        hnsw = self.uses_hnsw(con, user_id)
        if not hnsw:
            # the plan reads the user's rows through the user_id btree (a bitmap scan) and sorts them
            # by distance; with index scans off the HNSW index cannot be picked
            con.execute("set local enable_indexscan = off")
        kind_sql, kind_args = "", []
        if kinds is not None:
            kind_sql, kind_args = " and kind = any(%s::text[])", [list(kinds)]
        elif not episodes_by_default:
            kind_sql = " and kind <> 'episode'"
        vec_t = f"vector({dim})"
        sql = (f"select memory_id, kind, content, strength, source_message_ids, is_question,"
               f" 1 - (embedding::{vec_t} <=> %s::{vec_t}) as similarity, created_at, happened_on, happened_grain"
               f' from {sql_ident(self.schema)}.long_term_memory'
               f" where user_id = %s and valid_to is null{kind_sql}"
               f" order by embedding::{vec_t} <=> %s::{vec_t} limit %s")
        # the factor's range over every possible memory: it is non-decreasing in strength (which lies
        # in [0, 1]) and otherwise depends on the flags is_question and is_assistant, so its extremes
        # are among these 8 corners. to_assistant is false: the vector fusion has no query text (the
        # statement's `addressed` exists only with a lexical leg), so 'assistant' memories carry the
        # assistant weight.
        ends = self._factor(formula, np.repeat([0.0, 1.0], 4), np.tile([False, False, True, True], 2),
                            np.tile([False, True], 4))
        f_min, f_max = float(np.nanmin(ends)), float(np.nanmax(ends))
        out: list[tuple[Any, ...]] = []
        for intent, vec in enumerate(vectors, start=1):
            q = "[" + ",".join(repr(float(x)) for x in vec) + "]"
            c = max(first, 8 * top_k)
            while True:
                limit = min(c, EF_SEARCH_MAX) if hnsw else c
                if hnsw:  # the search list is at least ef_floor long: more of the nearest are found
                    con.execute(f"set local hnsw.ef_search = {int(min(max(limit, ef_floor), EF_SEARCH_MAX))}")
                rows = con.execute(sql, [q, user_id, *kind_args, q, limit]).fetchall()
                kept = [r for r in rows if r[6] is not None and math.isfinite(r[6]) and r[6] >= min_sim]
                scores = formula.score(
                    formula.relevance(cos=np.array([r[6] for r in kept], dtype=np.float64)),
                    self._factor(formula, np.array([r[3] for r in kept], dtype=np.float64),
                                 np.array([bool(r[5]) for r in kept], dtype=bool),
                                 np.array([r[1] == "assistant" for r in kept], dtype=bool)))
                scored = [(-float(sc), mid, kind, content, sim, strength, float(sc), sources, dates)
                          for sc, (mid, kind, content, strength, sources, _, sim, *dates) in zip(scores, kept)]
                scored.sort(key=lambda r: (r[0], r[1]))
                best = scored[:top_k]
                farthest = min((r[6] for r in rows if r[6] is not None), default=None)
                settled = False
                if farthest is not None:
                    bound = formula.bound(float(formula.relevance(cos=farthest)), f_min, f_max)
                    settled = farthest < min_sim or (len(best) == top_k and best[-1][6] > bound)
                if settled or (not hnsw and len(rows) < limit):  # exact: every row of the user was a candidate
                    break
                if hnsw and limit >= EF_SEARCH_MAX:
                    self.fallbacks += 1
                    return None
                c *= 4
            for rank, (_, mid, kind, content, sim, strength, score, sources, dates) in enumerate(best, start=1):
                out.append((intent, rank, mid, kind, content, sim, strength, score, sources, 0.0, *dates))
        if hnsw:
            self.used += 1
        else:
            self.exact += 1
        return out
