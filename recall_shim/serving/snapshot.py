"""Open a published serving snapshot, base or delta (docs/serving.md "Layered snapshots").

A base snapshot holds full tables. A delta holds the memories written since the snapshot before it
plus every current memory's strength (``memory_state``), and views named like the base's tables
that join ``memory_state`` to the rows of every layer of its chain. Those views reference the
other layer files by alias, so a reader opens the snapshot read-only and attaches each layer
listed in ``serving_layers`` under its alias; then every statement that reads
``long_term_memory``, ``memory_term_index`` or ``memory_term_stats`` runs unchanged."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import duckdb

from recall_shim.common.durable import fsync_dir, fsync_path
from recall_shim.errors import InvalidInput, SnapshotIncomplete, StorageFailure
from recall_shim.common.paths import StorePaths, project_vars
from recall_shim.common.sql import sql_ident, sql_literal

__all__ = ["PublishManifest", "attach_snapshot", "connect_snapshot",
           "layer_alias", "published_snapshot", "read_manifest", "serving_tables", "snapshot_layers"]

# a row order: column names, comma-separated (the same pattern as the var's rule in macros/vars.sql)
_ORDER = re.compile(r"([a-z_]+(, [a-z_]+)*)?")


def serving_tables() -> dict[str, str]:
    """The tables a serving snapshot holds -> the ``order by`` clause its rows are stored in
    (empty: any order): var ``serving_tables`` of dbt_project.yml, which the publish macro reads."""
    raw = project_vars().get("serving_tables")
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) and _ORDER.fullmatch(v)
                                            for k, v in raw.items()):
        raise InvalidInput("var serving_tables in dbt_project.yml must map table names to column lists")
    return {k: f"order by {v}" if v else "" for k, v in raw.items()}


@dataclass(frozen=True)
class PublishManifest:
    """What the last publish wrote (the publish macro's ``serving_manifest``): the snapshot file
    name, base or delta, why, the layer files it reads (itself last), when, and the dbt
    invocation that wrote it."""

    snapshot: str
    kind: str
    reason: str
    layers: tuple[str, ...]
    built_at: str
    invocation_id: str


def read_manifest(paths: StorePaths) -> PublishManifest | None:
    """The store's serving manifest, or None when there is none or it cannot be read as one (a
    torn file after a power cut: the snapshots' .ready markers still decide what is served).
    The snapshot must be a plain ``snap-*.duckdb`` file name of the serving folder."""
    try:
        raw = json.loads((paths.serving / paths.layout.manifest).read_text(encoding="utf-8"))
        m = PublishManifest(snapshot=str(raw["snapshot"]), kind=str(raw["kind"]), reason=str(raw["reason"]),
                            layers=tuple(str(x) for x in raw["layers"]), built_at=str(raw["built_at"]),
                            invocation_id=str(raw["invocation_id"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if (Path(m.snapshot).name != m.snapshot or not m.snapshot.startswith(paths.layout.snapshot_prefix)
            or not m.snapshot.endswith(".duckdb")):
        return None
    return m


def sync_manifest(paths: StorePaths) -> None:
    """fsync the manifest and its folder (DuckDB's COPY renames a temporary file into place but
    does not fsync it); a missing manifest is left alone."""
    serving = paths.serving
    try:
        fsync_path(serving / paths.layout.manifest)
    except FileNotFoundError:
        return
    fsync_dir(serving)


def published_snapshot(paths: StorePaths, dbt_target: Path) -> Path | None:
    """The snapshot the dbt run that just ended published: the serving manifest, when its
    invocation id is that run's (``run_results.json`` in ``dbt_target``, dbt's own record of
    the run), fsynced; None when that run published nothing. Caller holds the build lock."""
    serving = paths.serving
    try:
        results = json.loads((dbt_target / "run_results.json").read_text(encoding="utf-8"))
        invocation = str(results["metadata"]["invocation_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    manifest = read_manifest(paths)
    if manifest is None or manifest.invocation_id != invocation or not (serving / manifest.snapshot).exists():
        return None
    try:
        sync_manifest(paths)
    except OSError as exc:
        raise StorageFailure(f"cannot sync the serving manifest: {exc.strerror or exc}") from None
    return serving / manifest.snapshot


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
