"""Forget a user, or one memory, everywhere the store keeps it (docs/data_protection.md).

Order, all under the store's build lock (no build runs meanwhile):

1. open the warehouse read-write (DuckDB's own file lock: a clear error if someone holds it) and
   find the ids to remove: the user's (or the memory's) memory_ids, source message_ids and
   landing_ids, discovered generically from every table's columns;
2. under the exclusive landing write lock: stamp ``forgotten_at``, write the tombstone (ids only)
   to ``<stem>.inbox/forget/`` and rewrite every landing file without the rows (atomic replace);
3. delete the rows from every warehouse table that has a ``user_id``, ``memory_id``,
   ``message_id`` or ``landing_id`` column (plus orphaned embeddings; for a memory, every
   candidate and memory row of its owner, which the next build rebuilds), then rewrite the DuckDB
   file into a fresh one (``COPY FROM DATABASE``) so that no freed block keeps old bytes;
4. publish a purged copy of the newest serving snapshot with a freshly built serving index, and
   delete every older snapshot and index folder;
5. delete the store's dbt target/ and logs/; append the audit record (no content).

Steps 2-5 are journalled (recall_shim/forget/journal.py): the intent (ids only) is written before
step 2, each step is safe to repeat and recorded done, the audit line is written once at the end.
An interrupted forget is completed by the next forget, build or store open; meanwhile readers
serve none of its ids.

Values are always bound parameters or rows of temporary tables; only identifiers read from the
catalog and file paths are quoted into SQL text.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any, Iterable, Sequence

import duckdb

from recall_shim.errors import StorageFailure, StoreBusy
from recall_shim.forget.journal import (append_audit_once, clear_journal, load_journal, prune_temp_files, save_journal,
                                        storage_errors)
from recall_shim.forget.common import (ID_COLUMNS, ForgetReport, ForgetTargets, checked_forget_request,
                                       memory_owner)
from recall_shim.forget.landing import purge_landing
from recall_shim.forget.serving import compact, purge_serving
from recall_shim.write.landing import utc_now_iso, write_landing_file
from recall_shim.common.locks import file_lock, try_file_lock
from recall_shim.common.paths import StorePaths
from recall_shim.common.sql import sql_ident
from recall_shim.forget.tombstones import message_tombstones, tombstones

# Tables with these columns (the incremental int_memory_candidates and int_memories_consolidated)
# lose all rows of a forgotten memory's owner; the next build rebuilds that user from its
# extractions, so merged mentions, provenance and supersession are as if the memory never was.
REBUILT_COLUMNS = frozenset({"candidate_id", "candidate_ids"})
# Rebuilt from the tombstone files on every build; never purged by a forget.
KEEP_TABLES = frozenset({"stg_forget_requests"})


# --- the warehouse ----------------------------------------------------------------------------

def _tables(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, set[str]]]:
    """(schema, table, columns) of every base table of the connection's own database."""
    rows = con.execute(
        "select c.table_schema, c.table_name, list(c.column_name) from information_schema.columns c"
        " join information_schema.tables t using (table_catalog, table_schema, table_name)"
        " where c.table_catalog = current_database() and t.table_type = 'BASE TABLE'"
        " group by all order by all"
    ).fetchall()
    return [(s, t, set(cols)) for s, t, cols in rows if t not in KEEP_TABLES]


def _open_rw(db: Path) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(db))
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise StoreBusy(f"cannot open {db} for writing (another process holds it): {exc}") from None
        raise StorageFailure(f"cannot open {db} for writing: {exc}") from None


def _ids(con: duckdb.DuckDBPyConnection, tables: list[tuple[str, str, set[str]]], column: str,
         where_col: str, values: Iterable[str], user: str | None = None) -> set[str]:
    """Distinct ``column`` of every table having ``column`` and ``where_col`` where ``where_col``
    is one of ``values`` (user_id also matches with spaces trimmed). With ``user``, only rows of
    that user (tables with a user_id column): ids are unique per user, not across users."""
    vals = sorted(set(values))
    if not vals:
        return set()
    out: set[str] = set()
    for schema, table, cols in tables:
        if column not in cols or where_col not in cols or (user is not None and "user_id" not in cols):
            continue
        cond = (f"list_contains($1::varchar[], {where_col}) or list_contains($1::varchar[], trim({where_col}))"
                if where_col == "user_id" else f"list_contains($1::varchar[], {where_col})")
        params: list[Any] = [vals]
        if user is not None:
            cond = f"({cond}) and (user_id = $2 or trim(user_id) = $2)"
            params.append(user)
        sel = f"unnest({column})" if column == "source_message_ids" else column
        rows = con.execute(
            f"select distinct {sel} from {sql_ident(schema)}.{sql_ident(table)} where {cond}", params
        ).fetchall()
        out.update(r[0] for r in rows if r[0] is not None)
    return out


def _find_targets(con: duckdb.DuckDBPyConnection | None, user_id: str | None,
                  memory_id: str | None) -> tuple[ForgetTargets, bool]:
    if memory_id is None:
        assert user_id is not None
        t = ForgetTargets("user", user_id, set(), set(), set())
        if con is None:
            return t, False
        tables = _tables(con)
        t.memory_ids = _ids(con, tables, "memory_id", "user_id", [user_id])
        t.message_ids = _ids(con, tables, "message_id", "user_id", [user_id])
        t.landing_ids = _ids(con, tables, "landing_id", "user_id", [user_id])
        return t, bool(t.memory_ids or t.message_ids or t.landing_ids)

    t = ForgetTargets("memory", None, {memory_id}, set(), set())
    if con is None:
        return t, False
    tables = _tables(con)
    owners = _ids(con, tables, "user_id", "memory_id", [memory_id])
    t.user_id = memory_owner(memory_id, owners, user_id, "warehouse")
    if t.user_id is None:
        return t, False
    t.message_ids = _ids(con, tables, "source_message_ids", "memory_id", [memory_id], user=t.user_id)
    t.landing_ids = _ids(con, tables, "landing_id", "message_id", t.message_ids, user=t.user_id)
    # the owner's memories whose every source message goes too are forgotten with it
    # (docs/data_protection.md)
    for schema, table, cols in tables:
        if {"memory_id", "source_message_ids", "user_id"} <= cols and t.message_ids:
            rows = con.execute(
                f"select distinct memory_id from {sql_ident(schema)}.{sql_ident(table)}"
                " where user_id = $2 and len(source_message_ids) > 0"
                " and list_has_all($1::varchar[], source_message_ids)",
                [sorted(t.message_ids), t.user_id],
            ).fetchall()
            t.memory_ids.update(r[0] for r in rows)
    return t, bool(owners)


def _load_targets(con: duckdb.DuckDBPyConnection, t: ForgetTargets) -> None:
    for name, values in (("memory", t.memory_ids), ("message", t.message_ids), ("landing", t.landing_ids),
                         ("user", {t.user_id} if t.user_id else set())):
        con.execute(f"create or replace temp table _forget_{name}_ids (id varchar)")
        if values:
            con.execute(f"insert into _forget_{name}_ids select unnest($1::varchar[])", [sorted(values)])


def _delete_rows(con: duckdb.DuckDBPyConnection, t: ForgetTargets) -> dict[str, int]:
    """Delete the targets' rows from every base table; returns rows removed per table."""
    _load_targets(con, t)
    tables = _tables(con)
    # embeddings held without any id (keyed by content hash) go when no remaining memory has them
    with_vectors = [(s, n) for s, n, cols in tables if {"memory_id", "embedding"} <= cols]
    con.execute("create or replace temp table _forget_vectors (e float[])")
    if with_vectors:
        gone = " union ".join(
            f"select embedding::float[] from {sql_ident(s)}.{sql_ident(n)} where memory_id in (select id from _forget_memory_ids)"
            for s, n in with_vectors)
        kept = " union ".join(
            f"select embedding::float[] from {sql_ident(s)}.{sql_ident(n)} where memory_id not in (select id from _forget_memory_ids)"
            for s, n in with_vectors)
        con.execute(f"insert into _forget_vectors ({gone}) except ({kept})")
    removed: dict[str, int] = {}
    for schema, table, cols in tables:
        conds = []
        if "user_id" in cols:
            if t.scope == "user":
                conds.append("user_id in (select id from _forget_user_ids)"
                             " or trim(user_id) in (select id from _forget_user_ids)")
            elif not cols & set(ID_COLUMNS):
                # per-user aggregates (e.g. term statistics): rebuilt at the next build
                conds.append("user_id in (select id from _forget_user_ids)")
        if t.scope == "memory" and "user_id" in cols and cols & REBUILT_COLUMNS:
            # the owner's candidates and memories: the next build rebuilds them from the owner's
            # remaining extractions (incremental models cannot tell which rows a forget touched)
            conds.append("user_id in (select id from _forget_user_ids)")
        for col in ID_COLUMNS:
            if col in cols:
                cond = f"{col} in (select id from _forget_{col.split('_')[0]}_ids)"
                if "user_id" in cols:
                    # ids are per user: another user's row with the same id is never touched
                    cond += (" and (user_id in (select id from _forget_user_ids)"
                             " or trim(user_id) in (select id from _forget_user_ids))")
                conds.append(cond)
        if "embedding" in cols and not cols & {"user_id", *ID_COLUMNS}:
            conds.append("embedding::float[] in (select e from _forget_vectors)")
        if not conds:
            continue
        where = " or ".join(f"({c})" for c in conds)
        n = con.execute(f"delete from {sql_ident(schema)}.{sql_ident(table)} where {where}").fetchone()
        count = int(n[0]) if n else 0
        if count:
            removed[table] = count
    return removed


# --- the operation ---------------------------------------------------------------------------

def forget(paths: StorePaths, *, user_id: str | None = None, memory_id: str | None = None,
           actor: str | None = None, unbuilt: tuple[str, Sequence[str]] | None = None) -> ForgetReport:
    """Forget ``user_id`` (every row of that user landed up to now) or ``memory_id`` (that memory
    forever, with its source messages) in every file of the store. An interrupted forget (of
    this request or another) is completed first; rerunning an interrupted request completes it
    and reports it (one audit line). ``unbuilt``: (owner, source message ids) of a memory the
    hot tail made from messages no build loaded yet (recall_shim/serving/tail.py), whose rows
    are only in the landing files."""
    user_id, memory_id, who = checked_forget_request(user_id, memory_id, actor)
    with storage_errors("cannot prepare the store's folders"):
        paths.ensure()
    with file_lock(paths.build_lock, exclusive=True):
        pending = load_journal(paths)
        if pending is not None:
            report = _run_journal(paths, pending)
            if (pending["requested_user_id"], pending["memory_id"]) == (user_id, memory_id):
                return report  # this very request, interrupted before: now completed
        return _run_journal(paths, _begin(paths, user_id, memory_id, who, unbuilt))


def complete_pending_forget(paths: StorePaths, *, lock: str) -> ForgetReport | None:
    """Complete an interrupted forget, if any. ``lock``: "held" (the caller holds the build lock,
    as a build does), "wait" for it, or "try" (store open: a held build lock means a build or
    forget is running, which completes it; a store that cannot be written is left alone)."""
    if not paths.forget_journal.exists():
        return None
    if lock == "held":
        journal = load_journal(paths)
        return _run_journal(paths, journal) if journal is not None else None
    if lock == "wait":
        with file_lock(paths.build_lock, exclusive=True):
            return complete_pending_forget(paths, lock="held")
    with try_file_lock(paths.build_lock, exclusive=True) as held:
        return complete_pending_forget(paths, lock="held") if held else None


def _begin(paths: StorePaths, user_id: str | None, memory_id: str | None, who: str,
           unbuilt: tuple[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Find the targets and write the journal (the intent) before anything is purged."""
    con = _open_rw(paths.db) if paths.db.exists() else None
    try:
        targets, found = _find_targets(con, user_id, memory_id)
    finally:
        if con is not None:
            con.close()
    if unbuilt is not None and targets.scope == "memory" and targets.user_id in (None, unbuilt[0]):
        targets.user_id = unbuilt[0]  # its source messages are landed, not built yet: purged from the files
        targets.message_ids.update(unbuilt[1])
        found = True
    with file_lock(paths.write_lock, exclusive=True):  # forgotten_at: after every acknowledged row
        journal: dict[str, Any] = {
            "audit_id": uuid.uuid4().hex, "tombstone_id": uuid.uuid4().hex, "scope": targets.scope,
            "user_id": targets.user_id, "requested_user_id": user_id, "memory_id": memory_id, "actor": who,
            "forgotten_at": utc_now_iso(), "found": found, "memory_ids": sorted(targets.memory_ids),
            "message_ids": sorted(targets.message_ids), "landing_ids": sorted(targets.landing_ids),
            "done": [], "removed": {}, "housekeeping": {},
        }
        save_journal(paths, journal)
    return journal


def _tombstone(paths: StorePaths, journal: dict[str, Any], t: ForgetTargets) -> None:
    """Write the forget's tombstones (recall_shim/forget/tombstones.py) once: the first carries the
    journal's tombstone_id, so a resumed run sees the interrupted run wrote them."""
    needle = f'"tombstone_id": "{journal["tombstone_id"]}"'.encode("ascii")
    for f in paths.forget.glob("*.jsonl"):
        if needle in f.read_bytes():
            return  # written by the interrupted run
    records = tombstones(t.scope, t.user_id, journal["memory_id"], t.memory_ids, t.message_ids,
                         journal["forgotten_at"])
    records[0]["tombstone_id"] = journal["tombstone_id"]
    write_landing_file(paths.forget, records)


def _run_journal(paths: StorePaths, journal: dict[str, Any]) -> ForgetReport:
    """Run the steps of ``journal`` not yet done (caller holds the build lock), then audit once."""
    t = ForgetTargets(journal["scope"], journal["user_id"], set(journal["memory_ids"]), set(journal["message_ids"]),
                 set(journal["landing_ids"]))
    removed: dict[str, int] = journal["removed"]
    housekeeping: dict[str, int] = journal["housekeeping"]
    done: list[str] = journal["done"]
    messages = set(t.message_ids)
    with storage_errors("cannot clean up the files of an interrupted forget"):
        prune_temp_files(paths, min_age=0.0)  # leftovers of an interrupted run (under the build lock)

    def step(name: str) -> bool:
        return name not in done

    def finish(name: str) -> None:
        done.append(name)
        save_journal(paths, journal)

    if step("landing"):
        with file_lock(paths.write_lock, exclusive=True):
            with storage_errors("cannot write the forget tombstone"):
                _tombstone(paths, journal, t)
            landed, landed_ids = purge_landing(paths, t, journal["forgotten_at"], housekeeping)
            # ids met only in the landing files (not built yet): tombstoned against replays too
            with storage_errors("cannot write the forget tombstone"):
                write_landing_file(paths.forget, message_tombstones(
                    t.user_id, t.landed_message_ids, journal["forgotten_at"]))
        messages |= landed_ids
        removed.update({k: removed.get(k, 0) + v for k, v in landed.items()})
        journal["found"] = bool(journal["found"] or landed["landing:messages"] or landed["landing:access"])
        journal["messages"] = len(messages)
        finish("landing")
    if step("warehouse"):
        if paths.db.exists():
            con = _open_rw(paths.db)
            try:
                with storage_errors("cannot delete the rows from the warehouse"):
                    for k, v in _delete_rows(con, t).items():
                        removed[f"warehouse:{k}"] = removed.get(f"warehouse:{k}", 0) + v
            except BaseException:
                con.close()
                raise
            compact(con, paths.db, paths.db)
        finish("warehouse")
    if step("serving"):
        for k, v in purge_serving(paths, lambda c: _delete_rows(c, t), housekeeping).items():
            removed[k] = removed.get(k, 0) + v
        finish("serving")
    if step("dbt"):
        if paths.dbt_dir.exists():
            shutil.rmtree(paths.dbt_dir, ignore_errors=True)
            housekeeping["dbt_target_and_logs"] = 1
        finish("dbt")
    found = bool(journal["found"])
    report = ForgetReport(
        audit_id=journal["audit_id"], scope=t.scope, user_id=t.user_id, memory_id=journal["memory_id"],
        actor=journal["actor"], forgotten_at=journal["forgotten_at"], found=found,
        memories=len(t.memory_ids) if found else 0, messages=int(journal.get("messages", len(messages))),
        removed={k: v for k, v in removed.items() if v or k.startswith("landing:")}, housekeeping=housekeeping,
    )
    append_audit_once(paths.audit, {"action": "forget", "completed_at": utc_now_iso(), **report.as_dict()})
    clear_journal(paths)
    return report
