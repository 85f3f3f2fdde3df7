"""Open a published serving snapshot, base or delta (docs/serving.md "Layered snapshots").

A base snapshot holds full tables. A delta holds the memories written since the snapshot before it
plus every current memory's strength (``memory_state``), and views named like the base's tables
that join ``memory_state`` to the rows of every layer of its chain. Those views reference the
other layer files by alias, so a reader opens the snapshot read-only and attaches each layer
listed in ``serving_layers`` under its alias; then every statement that reads
``long_term_memory``, ``memory_term_index`` or ``memory_term_stats`` runs unchanged."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import duckdb

from recall_shim.errors import SnapshotIncomplete
from recall_shim.common.sql import sql_ident, sql_literal

__all__ = ["LAYER_TABLES", "SNAPSHOT_ORDER", "attach_snapshot", "connect_snapshot", "layer_alias", "snapshot_layers"]

# tables of a delta snapshot that describe layers (not served as such)
LAYER_TABLES = frozenset({"delta_memories", "delta_term_index", "memory_state", "serving_layers"})
# the row order a base snapshot stores its big tables in (as the publish macro writes them)
SNAPSHOT_ORDER = {"long_term_memory": "order by user_id", "memory_term_index": "order by user_id, term",
                  "memory_term_stats": "order by user_id, term"}


def layer_alias(file: str) -> str:
    """The alias a snapshot file is attached under as a layer (twin of the macro
    ``serving_layer_alias``)."""
    stem = file[: -len(".duckdb")] if file.endswith(".duckdb") else file
    return "l_" + re.sub(r"[^a-z0-9]", "_", stem.lower())


def _layers(con: duckdb.DuckDBPyConnection, catalog: str | None = None) -> list[tuple[int, str, str, str]]:
    db = "current_database()" if catalog is None else sql_literal(catalog)
    has = con.execute(f"select count(*) from duckdb_tables() where database_name = {db}"
                      " and table_name = 'serving_layers'").fetchall()[0][0]
    if not has:
        return []
    where = "" if catalog is None else f"{sql_ident(catalog)}.main."
    return [(int(r[0]), str(r[1]), str(r[2]), str(r[3]))
            for r in con.execute(f"select layer, file, alias, kind from {where}serving_layers order by layer").fetchall()]


def snapshot_layers(path: Path) -> list[str]:
    """The files (names in the snapshot's folder) ``path`` reads: itself and every layer it
    lists. A snapshot from before layering lists only itself."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        files = [f for _, f, _, _ in _layers(con)]
    finally:
        con.close()
    return files if path.name in files else [*files, path.name]


# connections to one file in one process share a DuckDB instance, and with it its attachments:
# two stores (or threads) opening the same snapshot at once must not both attach a layer
_ATTACH = threading.Lock()


def _attach_layers(con: duckdb.DuckDBPyConnection, path: Path, catalog: str | None = None) -> None:
    with _ATTACH:
        attached = {r[0] for r in con.execute("select database_name from duckdb_databases()").fetchall()}
        for _, file, alias, _ in _layers(con, catalog):
            if file == path.name or alias in attached:
                continue
            if alias != layer_alias(file):
                raise SnapshotIncomplete(f"snapshot {path.name} lists layer {file} under an unexpected alias {alias!r}")
            layer = path.parent / file
            if not layer.exists():
                raise SnapshotIncomplete(f"snapshot {path.name} reads layer {file}, which is gone")
            try:
                # IF NOT EXISTS: another connection of the instance may have attached it meanwhile
                con.execute(f"attach if not exists {sql_literal(layer)} as {sql_ident(alias)} (read_only)")
            except duckdb.IOException as exc:  # pruned (or forgotten) between the check and the attach
                raise SnapshotIncomplete(f"snapshot {path.name} reads layer {file}, which is gone: {exc}") from None


def connect_snapshot(path: Path | str) -> duckdb.DuckDBPyConnection:
    """Open the published snapshot ``path`` read-only with every layer it reads attached.
    Raises SnapshotIncomplete if a layer file is missing (the snapshot cannot be served)."""
    path = Path(path)
    con = duckdb.connect(str(path), read_only=True)
    try:
        _attach_layers(con, path)
    except BaseException:
        con.close()
        raise
    return con


def attach_snapshot(con: duckdb.DuckDBPyConnection, path: Path, name: str) -> None:
    """Attach the published snapshot ``path`` read-only to ``con`` as ``name``, with every layer
    it reads (so its views work from ``con``, e.g. a read-write connection to another file)."""
    con.execute(f"attach {sql_literal(path)} as {sql_ident(name)} (read_only)")
    _attach_layers(con, path, name)
