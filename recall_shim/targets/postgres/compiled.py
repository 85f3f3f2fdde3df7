"""The compiled recall statements and settings of a PostgreSQL store's last build (the twin of
SnapshotReader's ``settings`` on DuckDB), read from ``<schema>.recall_queries``."""

from __future__ import annotations

from typing import Any

from recall_shim.common.sql import sql_ident
from recall_shim.errors import StoreNotBuilt
from recall_shim.serving.formula import FormulaError, RecallFormula
from recall_shim.serving.reader import RecallSettings
from recall_shim.targets.postgres.server import PgConnection

__all__ = ["CompiledSettings", "SETTING_COLUMNS"]

SETTING_COLUMNS = ("sql_text", "fusion_method", "embedding_model", "embedding_dim", "embedding_query_form",
                   "default_top_k", "default_min_sim", "max_top_k", "max_query_chars", "recall_episodes_by_default",
                   "relevance_numpy", "factor_numpy", "score_numpy")


class CompiledSettings:
    """The compiled statements and settings of the last build (the twin of SnapshotReader's
    ``settings``), reloaded after every build of this process and on demand."""

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn
        self._settings: RecallSettings | None = None
        # a recall without kinds includes episodes: the build's published setting (set with settings)
        self.episodes_by_default = True
        # the build's recall score rendered for numpy (macros/recall.sql: fusion, strength, question
        # and assistant weighting), for the HNSW path; None when the schema was built before it was
        # published (then the statement runs). Set with settings.
        self.formula: RecallFormula | None = None

    def reset(self) -> None:
        self._settings = None

    @property
    def settings(self) -> RecallSettings:
        if self._settings is None:
            rows = self._fetch()
            by_name = {r[0]: r[1:] for r in rows}
            if "recall" not in by_name:
                raise StoreNotBuilt(f"schema {self.conn.schema} has no compiled recall statement: build first")
            values = dict(zip(SETTING_COLUMNS, by_name["recall"]))
            self.episodes_by_default = bool(values["recall_episodes_by_default"])
            try:
                self.formula = RecallFormula.of_row(values)
            except FormulaError:
                self.formula = None
            sim = by_name.get("similarity_distribution")
            self._settings = RecallSettings(
                sql_text=values["sql_text"], similarity_sql=sim[0] if sim else "",
                fusion_method=values["fusion_method"], embedding_model=values["embedding_model"], embedding_dim=int(values["embedding_dim"]),
                embedding_query_form=values["embedding_query_form"], default_top_k=int(values["default_top_k"]),
                default_min_sim=float(values["default_min_sim"]), max_top_k=int(values["max_top_k"]),
                max_query_chars=int(values["max_query_chars"]))
        return self._settings

    def _fetch(self) -> list[tuple[Any, ...]]:
        import psycopg

        try:
            with self.conn.connect() as con:
                return con.execute(f'select query_name, {", ".join(SETTING_COLUMNS)} '
                                   f'from {sql_ident(self.conn.schema)}.recall_queries').fetchall()
        except psycopg.errors.UndefinedTable:
            raise StoreNotBuilt(f"schema {self.conn.schema} has no recall_queries: build first") from None
