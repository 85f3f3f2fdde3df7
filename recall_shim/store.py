"""Which store the CLI, the HTTP/MCP servers and ``open_store`` use (docs/scaling_out.md).

The target is ``duckdb`` (default: a DuckDB file, ``--db`` / $AGENT_MEMORY_DB) or ``postgres``
(PostgreSQL + pgvector, named by the AGENT_MEMORY_PG_* variables the dbt profile reads). It is
chosen by the ``target`` argument (CLI ``--target``), else $AGENT_MEMORY_TARGET.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Union

from recall_shim.errors import InvalidInput
from recall_shim.targets.postgres.server import TARGET_ENV, selected_target
from recall_shim.targets.duckdb import MemoryStore

if TYPE_CHECKING:
    from recall_shim.targets.postgres.store import PgMemoryStore

__all__ = ["open_store", "AnyStore", "TARGET_ENV", "selected_target"]

AnyStore = Union[MemoryStore, "PgMemoryStore"]


def open_store(db: str | os.PathLike[str] | None = None, target: str | None = None) -> AnyStore:
    """A MemoryStore (DuckDB file ``db``) or a PgMemoryStore (AGENT_MEMORY_PG_* connection)."""
    if selected_target(target) == "postgres":
        if db is not None:
            raise InvalidInput("--db names a DuckDB file; the postgres target is named by the AGENT_MEMORY_PG_* "
                               "variables (docs/scaling_out.md)")
        from recall_shim.targets.postgres.store import PgMemoryStore

        return PgMemoryStore()
    return MemoryStore(db)
