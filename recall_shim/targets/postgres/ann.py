"""Indexed recall on PostgreSQL: HNSW proposes candidates, the compiled rank statement scores
them (docs/scaling_out.md; macros/recall.sql ``pg_ann_rank_sql``: the same ``recall_rank_sql``
and ``recall_score`` as every recall path, so no score is computed here).

Used by PgMemoryStore for the vector-only fusion (``fusion_method: vector``, the fusion DuckDB's
serving index serves too), without agent/session narrowing, for users with more current memories
than ``recall_index_min_rows``; everything else runs the compiled statement.

Per intent: one statement takes the nearest ``c`` memories of the user by the HNSW index on
``long_term_memory`` (``hnsw.ef_search = c``, the kind filter applied after the index scan), ranks
them, and returns the bound row's score (the farthest candidate's cosine at the corners of the
strength x question range). The answer is accepted when the k-th score beats it, or when no bound
row comes back (that cosine is already below the threshold); otherwise ``c`` grows 4x, up to
pgvector's ef_search limit (1000), after which the call falls back to the exact statement.
"""

from __future__ import annotations

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

    def recall(self, con: Any, rank_sql: str, *, user_id: str, vectors: Sequence[Sequence[float]], top_k: int,
               min_sim: float, kinds: Sequence[str] | None) -> list[tuple[Any, ...]] | None:
        """Rows shaped like the compiled statement's, or None when the caller must run it.
        ``rank_sql``: the schema's compiled ``ann_rank`` statement ($n parameters)."""
        import psycopg

        _, first = self._index_settings(con)
        out: list[tuple[Any, ...]] = []
        for intent, vec in enumerate(vectors, start=1):
            q = "[" + ",".join(repr(float(x)) for x in vec) + "]"
            c = max(first, 8 * top_k)
            while True:
                ef = min(c, EF_SEARCH_MAX)
                con.execute(f"set local hnsw.ef_search = {int(ef)}")
                with psycopg.RawCursor(con) as cur:
                    rows = cur.execute(rank_sql, [user_id, q, None if kinds is None else list(kinds), ef, int(top_k),
                                                  float(min_sim)]).fetchall()
                best = sorted((r for r in rows if r[1] > 0), key=lambda r: r[1])
                bound = [r[7] for r in rows if r[1] == 0]
                if not bound or (len(best) == top_k and best[-1][7] > bound[0]):
                    break
                if ef >= EF_SEARCH_MAX:
                    self.fallbacks += 1
                    return None
                c *= 4
            out += [(intent, *r[1:]) for r in best]
        self.used += 1
        return out
