"""Stores per target: DuckDB (the embedded default, MemoryStore) and PostgreSQL + pgvector
(PgMemoryStore), and ``open_store``, which picks one: the ``target`` argument (CLI ``--target``),
else $AGENT_MEMORY_TARGET, else duckdb."""

from __future__ import annotations

import os

from recall_shim.errors import BackendUnavailable, InvalidInput
from recall_shim.store import Store
from recall_shim.targets.duckdb import MemoryStore
from recall_shim.targets.postgres.store import PgMemoryStore

__all__ = ["open_store", "selected_target", "TARGET_ENV"]

#: which target the CLI, the server and ``open_store`` use: "duckdb" (default) or "postgres"
TARGET_ENV = "AGENT_MEMORY_TARGET"


def selected_target(target: str | None = None) -> str:
    """``target`` if given, else $AGENT_MEMORY_TARGET, else "duckdb"; checked."""
    t = (target or os.environ.get(TARGET_ENV) or "duckdb").strip().lower()
    if t not in ("duckdb", "postgres"):
        raise BackendUnavailable(f"unknown target {t!r}: use duckdb or postgres ({TARGET_ENV})")
    return t


def open_store(db: str | os.PathLike[str] | None = None, target: str | None = None) -> Store:
    """A MemoryStore (DuckDB file ``db``) or a PgMemoryStore (AGENT_MEMORY_PG_* connection)."""
    if selected_target(target) == "postgres":
        if db is not None:
            raise InvalidInput("--db names a DuckDB file; the postgres target is named by the AGENT_MEMORY_PG_* "
                               "variables (docs/scaling_out.md)")
        return PgMemoryStore()
    return MemoryStore(db)
