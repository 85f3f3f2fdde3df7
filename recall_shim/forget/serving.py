"""Forget's snapshot files: the compacted rewrite of a DuckDB file and the purged serving
snapshot that replaces every published one (steps 3 and 4 of recall_shim/forget/duckdb.py)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Callable

import duckdb

from recall_shim.common.durable import fsync_dir
from recall_shim.forget.common import restat_statement
from recall_shim.forget.journal import FORGET_TMP, storage_errors, write_atomic
from recall_shim.serving.index_build import build_index
from recall_shim.serving.terms import build_term_postings
from recall_shim.write.landing import utc_now_iso
from recall_shim.common.paths import StorePaths
from recall_shim.serving.published import ready_snapshots
from recall_shim.serving.snapshot import attach_snapshot, layer_alias, serving_tables, snapshot_layers
from recall_shim.common.sql import sql_ident, sql_literal


def compact(con: duckdb.DuckDBPyConnection, src: Path, dest: Path) -> None:
    """Copy the connection's database into a fresh file beside ``dest`` (only live rows; no
    freed blocks), close the connection, and atomically put the copy in place. ``src`` may equal
    ``dest``. On failure (e.g. disk full) the copy is removed and StorageFailure raised; ``src``
    is then as before the copy (its deletions committed)."""
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}{FORGET_TMP}")
    try:
        with storage_errors(f"cannot write a compacted copy of {src.name} (the forget resumes when run again)"):
            catalog = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
            con.execute("checkpoint")
            con.execute(f"attach {sql_literal(tmp)} as forget_fresh")
            try:
                con.execute(f"copy from database {sql_ident(catalog)} to forget_fresh")
                con.execute("checkpoint forget_fresh")
            finally:
                try:
                    con.execute("detach forget_fresh")
                finally:
                    con.close()
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, dest)
    finally:
        for stale in (tmp, Path(str(tmp) + ".wal")):
            stale.unlink(missing_ok=True)
    Path(str(dest) + ".wal").unlink(missing_ok=True)
    if src != dest:
        src.unlink(missing_ok=True)
        Path(str(src) + ".wal").unlink(missing_ok=True)
    fsync_dir(dest.parent)


def materialize_base(snapshot: Path, work: Path, file: str) -> None:
    """Write ``snapshot`` (a base or a delta over layers) into ``work`` as a base snapshot named
    ``file``: every serving table (var serving_tables; a delta's views materialized) copied in
    its row order, and a serving_layers listing only itself (watermark kept), so nothing of the
    older layers is needed afterwards."""
    work.unlink(missing_ok=True)
    con = duckdb.connect(str(work))
    try:
        attach_snapshot(con, snapshot, "forget_src")
        names = [r[0] for r in con.execute(
            "select table_name from information_schema.tables where table_catalog = 'forget_src'"
            " and table_schema = 'main' order by table_name").fetchall()]
        watermark = None
        if "serving_layers" in names:
            watermark = con.execute("select max(watermark) from forget_src.main.serving_layers").fetchall()[0][0]
        for name, order in serving_tables().items():
            if name in names:
                con.execute(f"create table main.{sql_ident(name)} as select * from forget_src.main.{sql_ident(name)}"
                            f" {order}")
        con.execute("create table main.serving_layers as select 0::integer as layer, $1::varchar as file,"
                    " $2::varchar as alias, (select count(*) from main.long_term_memory)::bigint as rows,"
                    " $3::timestamp as watermark, 'base'::varchar as kind", [file, layer_alias(file), watermark])
    finally:
        con.close()


def _restat_owners(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute the BM25 statistics of the users a forget left with term rows but no statistics
    (recall_shim/forget/common.py ``restat_statement``), over their remaining term rows."""
    tables = {r[0] for r in con.execute("select table_name from information_schema.tables"
                                        " where table_schema = 'main'").fetchall()}
    if not {"memory_term_stats", "memory_term_index", "recall_queries"} <= tables:
        return
    sql = con.execute("select sql_text from recall_queries where query_name = 'tail_term_stats'").fetchall()
    if not sql:
        return
    con.execute("create or replace temp view tail_term_rows as select memory_id, user_id, term, doc_len"
                " from memory_term_index where user_id in (select user_id from memory_term_index"
                " except select user_id from memory_term_stats)")
    have = {r[0] for r in con.execute("select column_name from information_schema.columns"
                                      " where table_schema = 'main' and table_name = 'memory_term_stats'").fetchall()}
    con.execute(restat_statement("memory_term_stats", have, sql[0][0]))
    con.execute("drop view tail_term_rows")


def purge_serving(paths: StorePaths, delete_rows: Callable[[duckdb.DuckDBPyConnection], dict[str, int]],
                  housekeeping: dict[str, int]) -> dict[str, int]:
    """Publish a purged copy of the newest snapshot, then delete every other snapshot file. Safe
    to repeat (an interrupted run's files are unpublished: hidden or without a .ready marker).
    ``delete_rows`` deletes the forgotten rows through a connection (forget's own rules)."""
    removed: dict[str, int] = {}
    # the newest snapshot whose layer files all exist (one that is not served is not purged from)
    ready = [s for s in ready_snapshots(paths) if all((paths.serving / f).exists() for f in snapshot_layers(s))]
    new_name: str | None = None
    if ready:
        newest = ready[-1]
        stamp = utc_now_iso().replace("-", "").replace(":", "").replace(" ", "T").replace(".", "")
        new_name = f"{paths.layout.snapshot_prefix}{stamp}-forget{uuid.uuid4().hex[:6]}"
        work = paths.serving / f".{new_name}.work.duckdb"
        con = None
        try:
            with storage_errors("cannot write the purged serving snapshot (the forget resumes when run again)"):
                materialize_base(newest, work, f"{new_name}.duckdb")
                con = duckdb.connect(str(work))
                for table, n in delete_rows(con).items():
                    removed[f"serving:{table}"] = n
                _restat_owners(con)
                con.execute("update serving_layers set rows = (select count(*) from long_term_memory)")
            compact(con, work, paths.serving / f"{new_name}.duckdb")
        except BaseException:
            (paths.serving / f"{new_name}.duckdb").unlink(missing_ok=True)
            raise
        finally:
            try:
                if con is not None:
                    con.close()
            except duckdb.Error:
                pass
            for leftover in (work, Path(str(work) + ".wal")):
                leftover.unlink(missing_ok=True)
        try:  # a fresh serving index: a new heavy generation, no file (or hard link) of the old ones
            stats = build_index(paths.serving / f"{new_name}.duckdb")
            build_term_postings(paths.serving / f"{new_name}.duckdb")  # the hybrid fusion's lexical leg
            housekeeping["serving:index_rows"] = int(stats.get("rows", 0))
        except Exception:  # noqa: BLE001 - as at build: without an index the snapshot's statement serves
            shutil.rmtree(paths.serving / f"{new_name}.index", ignore_errors=True)
        write_atomic(paths.serving / f"{new_name}{paths.layout.ready}", b"invocation_id\nforget\n")
    dropped = 0
    if paths.serving.is_dir():
        for f in sorted(paths.serving.iterdir(), key=lambda p: not p.name.endswith(paths.layout.ready)):
            if new_name is not None and f.name.startswith(new_name + "."):
                continue
            if f.name.startswith((paths.layout.snapshot_prefix, "." + paths.layout.snapshot_prefix)):
                if f.is_dir():  # a snapshot's serving index (vectors and content payload)
                    shutil.rmtree(f, ignore_errors=True)
                else:
                    f.unlink(missing_ok=True)
                dropped += f.name.endswith(".duckdb")
        fsync_dir(paths.serving)
    housekeeping["serving:snapshots_dropped"] = dropped
    return removed
