"""Read a store's warehouse (the DuckDB file dbt builds) read-only, between builds.

One definition of the read pattern the report and the LangGraph store use: a shared lock on the
store's build lock (so a running build or forget finishes first instead of DuckDB refusing the
file), then a read-only connection. Values are always bound parameters."""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import duckdb

from recall_shim.errors import StoreNotBuilt
from recall_shim.common.paths import StorePaths

__all__ = ["read_warehouse", "rows", "tables"]


@contextmanager
def read_warehouse(db: str | os.PathLike[str] | StorePaths) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the warehouse, held while no build runs."""
    paths = db if isinstance(db, StorePaths) else StorePaths.of(db)
    if not paths.db.exists():
        raise StoreNotBuilt(f"no warehouse at {paths.db}: run `agent-memory build --db {paths.db}` first")
    paths.build_lock.parent.mkdir(parents=True, exist_ok=True)
    with open(paths.build_lock, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        con = duckdb.connect(str(paths.db), read_only=True)
        try:
            yield con
        finally:
            con.close()


def tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()}


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]
