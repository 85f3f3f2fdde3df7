"""Indexed recall on PostgreSQL: HNSW candidates, then the exact score (docs/scaling_out.md).

Used by PgMemoryStore for the vector-only fusion (``fusion_method: vector``, the fusion DuckDB's
serving index serves too), without agent/session narrowing, for users with more current memories
than ``recall_index_min_rows``; everything else runs the compiled statement.

Per intent: the nearest ``c`` memories of the user by the HNSW index on ``long_term_memory``
(``hnsw.ef_search = c``, the kind filter applied after the index scan), scored exactly as the
statement does (cosine x (1 - w + w x strength) x question or assistant weight, raw-cosine threshold, ties by
memory_id). The answer is accepted when the k-th score beats what any memory outside the
candidates could reach (the farthest candidate's cosine times the largest possible factor), or
when that cosine is already below the threshold; otherwise ``c`` grows 4x, up to pgvector's
ef_search limit (1000), after which the call falls back to the exact statement.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from recall_shim.common.sql import sql_ident

__all__ = ["PgAnn"]

EF_SEARCH_MAX = 1000  # pgvector's hnsw.ef_search upper limit


class PgAnn:
    """Per-store helper: index settings and per-user row counts (refreshed after each build)."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self._settings: tuple[int, int] | None = None
        self._counts: dict[str, int] = {}
        self.used = 0       # calls answered from the index (for benchmarks and tests)
        self.fallbacks = 0  # calls that widened to the limit and ran the exact statement

    def reset(self) -> None:
        self._settings = None
        self._counts.clear()

    def _index_settings(self, con: Any) -> tuple[int, int]:
        if self._settings is None:
            row = con.execute(f'select min_rows, candidates from {sql_ident(self.schema)}.recall_index_settings').fetchone()
            self._settings = (int(row[0]), int(row[1])) if row else (20_000, 128)
        return self._settings

    def applies(self, con: Any, user_id: str) -> bool:
        min_rows, _ = self._index_settings(con)
        if user_id not in self._counts:
            self._counts[user_id] = int(con.execute(
                f'select count(*) from {sql_ident(self.schema)}.long_term_memory where user_id = %s and valid_to is null',
                [user_id]).fetchone()[0])
        return self._counts[user_id] > min_rows

    def recall(self, con: Any, *, user_id: str, vectors: Sequence[Sequence[float]], top_k: int, min_sim: float,
               kinds: Sequence[str] | None, episodes_by_default: bool, dim: int, strength_weight: float,
               question_weight: float, assistant_weight: float = 1.0) -> list[tuple[Any, ...]] | None:
        """Rows shaped like the compiled statement's, or None when the caller must run it."""
        _, first = self._index_settings(con)
        kind_sql, kind_args = "", []
        if kinds is not None:
            kind_sql, kind_args = " and kind = any(%s::text[])", [list(kinds)]
        elif not episodes_by_default:
            kind_sql = " and kind <> 'episode'"
        vec_t = f"vector({dim})"
        sql = (f"select memory_id, kind, content, strength, source_message_ids, is_question,"
               f" 1 - (embedding::{vec_t} <=> %s::{vec_t}) as similarity"
               f' from {sql_ident(self.schema)}.long_term_memory'
               f" where user_id = %s and valid_to is null{kind_sql}"
               f" order by embedding::{vec_t} <=> %s::{vec_t} limit %s")
        # strength <= 1, so (1 - w + w x strength) <= 1
        top_factor = max(1.0, question_weight, assistant_weight, question_weight * assistant_weight)
        out: list[tuple[Any, ...]] = []
        for intent, vec in enumerate(vectors, start=1):
            q = "[" + ",".join(repr(float(x)) for x in vec) + "]"
            c = max(first, 8 * top_k)
            while True:
                ef = min(c, EF_SEARCH_MAX)
                con.execute(f"set local hnsw.ef_search = {int(ef)}")
                rows = con.execute(sql, [q, user_id, *kind_args, q, ef]).fetchall()
                scored = []
                for mid, kind, content, strength, sources, is_q, sim in rows:
                    if sim is None or not math.isfinite(sim) or sim < min_sim:
                        continue
                    weight = (question_weight if is_q else 1.0) * (assistant_weight if kind == "assistant" else 1.0)
                    score = sim * (1 - strength_weight + strength_weight * strength) * weight
                    scored.append((-score, mid, kind, content, sim, strength, score, sources))
                scored.sort(key=lambda r: (r[0], r[1]))
                best = scored[:top_k]
                farthest = min((r[6] for r in rows if r[6] is not None), default=None)
                settled = False
                if farthest is not None:
                    settled = farthest < min_sim or (len(best) == top_k and best[-1][6] > farthest * top_factor)
                if settled:
                    break
                if ef >= EF_SEARCH_MAX:
                    self.fallbacks += 1
                    return None
                c *= 4
            for rank, (_, mid, kind, content, sim, strength, score, sources) in enumerate(best, start=1):
                out.append((intent, rank, mid, kind, content, sim, strength, score, sources, 0.0))
        self.used += 1
        return out
