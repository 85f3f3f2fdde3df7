"""Forget on the PostgreSQL target: the same semantics as recall_shim/forget/duckdb.py (DuckDB), in
one PostgreSQL transaction (docs/data_protection.md, docs/scaling_out.md).

Under the schema's build lock (build_lock.py: a running build finishes first; builds wait for
the forget):

1. find the ids to remove (the user's, or the memory's, memory_ids, source message_ids and
   landing_ids), discovered generically from every table of the schema by its columns;
2. in one transaction: INSERT the tombstone (ids only) into ``forget_landing``; DELETE the rows
   from every table that has a ``user_id``, ``memory_id``, ``message_id`` or ``landing_id``
   column -- the landing tables included -- plus the cached embeddings no remaining memory uses
   and, for a memory, every candidate and memory row of its owner (the incremental models
   rebuild that user next build, as on DuckDB);
   INSERT the audit record (ids and counts, no content) into ``forget_audit``; COMMIT;
3. plain ``VACUUM`` every table rows were deleted from (and its TOAST table and indexes): the
   dead tuples become free space that later writes overwrite. Plain VACUUM takes no lock that
   blocks reads or writes (SHARE UPDATE EXCLUSIVE; its tail truncation takes ACCESS EXCLUSIVE
   only when nobody waits, and backs off), unlike ``VACUUM FULL``. Then delete the store's dbt
   target/ and logs/.

No forgotten content is readable through SQL after the COMMIT. The old bytes stay on disk in
free space until overwritten, and in WAL, backups and replicas until their retention ends: see
docs/data_protection.md for what remains where and how an operator bounds it.

Recalls see the store before or after the forget, never half of it (MVCC). Values are always
bound parameters; only identifiers read from the catalog are quoted into SQL text.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any, Sequence

from recall_shim.forget.common import (ID_COLUMNS, ForgetReport, ForgetTargets, checked_forget_request,
                                       memory_owner, restat_statement)
from recall_shim.forget.duckdb import REBUILT_COLUMNS
from recall_shim.write.landing import utc_now_iso
from recall_shim.forget.tombstones import tombstones
from recall_shim.targets.postgres.build_lock import LOCK_TABLE, BuildLock
from recall_shim.targets.postgres.generation import bump_generation
from recall_shim.targets.postgres.server import FORGET_COLUMNS, LANDING_TABLES, PgConnection, insert_rows
from recall_shim.common.sql import sql_ident

__all__ = ["forget_pg"]

# Rebuilt from the tombstones / kept as the record of what was done; never purged.
_KEEP_TABLES = frozenset({"stg_forget_requests", LANDING_TABLES["forget"], "forget_audit", "ingested_files", LOCK_TABLE})


def _tables(cur: Any, schema: str) -> list[tuple[str, set[str], dict[str, str]]]:
    """(table, columns, {column: udt_name}) of every base table of the schema."""
    rows = cur.execute(
        "select c.table_name, c.column_name, c.udt_name from information_schema.columns c"
        " join information_schema.tables t using (table_catalog, table_schema, table_name)"
        " where c.table_schema = %s and t.table_type = 'BASE TABLE' order by 1, c.ordinal_position",
        [schema]).fetchall()
    out: dict[str, dict[str, str]] = {}
    for table, col, udt in rows:
        out.setdefault(table, {})[col] = udt
    return [(t, set(cols), cols) for t, cols in out.items() if t not in _KEEP_TABLES]


def _ids(cur: Any, schema: str, tables: list[tuple[str, set[str], dict[str, str]]], column: str,
         where_col: str, values: set[str], user: str | None = None) -> set[str]:
    """Distinct ``column`` of every table having ``column`` and ``where_col`` where ``where_col``
    is one of ``values`` (user_id also matches with spaces trimmed). With ``user``, only rows of
    that user: ids are unique per user, not across users."""
    vals = sorted(values)
    if not vals:
        return set()
    out: set[str] = set()
    for table, cols, types in tables:
        if column not in cols or where_col not in cols or (user is not None and "user_id" not in cols):
            continue
        if column == "source_message_ids" and not types[column].startswith("_"):
            continue
        cond = (f"{where_col} = any(%s::text[]) or btrim({where_col}, ' ') = any(%s::text[])"
                if where_col == "user_id" else f"{where_col}::text = any(%s::text[])")
        params = [vals, vals] if where_col == "user_id" else [vals]
        if user is not None:
            cond = f"({cond}) and (user_id = %s or btrim(user_id, ' ') = %s)"
            params += [user, user]
        sel = f"unnest({column})" if column == "source_message_ids" else column
        rows = cur.execute(f"select distinct {sel} from {sql_ident(schema)}.{sql_ident(table)} where {cond}",
                           params).fetchall()
        out.update(str(r[0]) for r in rows if r[0] is not None)
    return out


def _find_targets(cur: Any, schema: str, tables: list[tuple[str, set[str], dict[str, str]]],
                  user_id: str | None, memory_id: str | None) -> tuple[ForgetTargets, bool]:
    if memory_id is None:
        assert user_id is not None
        t = ForgetTargets("user", user_id, set(), set(), set())
        t.memory_ids = _ids(cur, schema, tables, "memory_id", "user_id", {user_id})
        t.message_ids = _ids(cur, schema, tables, "message_id", "user_id", {user_id})
        t.landing_ids = _ids(cur, schema, tables, "landing_id", "user_id", {user_id})
        return t, bool(t.memory_ids or t.message_ids or t.landing_ids)
    t = ForgetTargets("memory", None, {memory_id}, set(), set())
    owners = _ids(cur, schema, tables, "user_id", "memory_id", {memory_id})
    t.user_id = memory_owner(memory_id, owners, user_id, "store")
    if t.user_id is None:
        return t, False
    t.message_ids = _ids(cur, schema, tables, "source_message_ids", "memory_id", {memory_id}, user=t.user_id)
    t.landing_ids = _ids(cur, schema, tables, "landing_id", "message_id", t.message_ids, user=t.user_id)
    # the owner's memories whose every source message goes too are forgotten with it
    for table, cols, types in tables:
        if ({"memory_id", "source_message_ids", "user_id"} <= cols and types["source_message_ids"].startswith("_")
                and t.message_ids):
            rows = cur.execute(
                f"select distinct memory_id from {sql_ident(schema)}.{sql_ident(table)}"
                " where user_id = %s and cardinality(source_message_ids) > 0"
                " and source_message_ids::text[] <@ %s::text[]",
                [t.user_id, sorted(t.message_ids)]).fetchall()
            t.memory_ids.update(r[0] for r in rows)
    return t, bool(owners)


def _delete_rows(cur: Any, schema: str, tables: list[tuple[str, set[str], dict[str, str]]],
                 t: ForgetTargets) -> dict[str, int]:
    """Delete the targets' rows from every table; returns rows removed per table."""
    ids = {"memory": sorted(t.memory_ids), "message": sorted(t.message_ids), "landing": sorted(t.landing_ids),
           "user": [t.user_id] if t.user_id else []}
    # embeddings held without any id (keyed by content hash) go when no remaining memory has them
    with_vectors = [n for n, cols, _ in tables if {"memory_id", "embedding"} <= cols]
    cur.execute("create temp table if not exists _forget_vectors (e vector) on commit drop")
    if with_vectors and ids["memory"]:
        gone = " union ".join(f"select embedding::vector from {sql_ident(schema)}.{sql_ident(n)}"
                              " where memory_id = any(%(m)s::text[])" for n in with_vectors)
        kept = " union ".join(f"select embedding::vector from {sql_ident(schema)}.{sql_ident(n)}"
                              " where not memory_id = any(%(m)s::text[])" for n in with_vectors)
        cur.execute(f"insert into _forget_vectors ({gone}) except ({kept})", {"m": ids["memory"]})
    removed: dict[str, int] = {}
    for table, cols, _ in tables:
        conds = []
        if "user_id" in cols:
            if t.scope == "user":
                conds.append("user_id = any(%(user)s::text[]) or btrim(user_id, ' ') = any(%(user)s::text[])")
            elif not cols & set(ID_COLUMNS):
                conds.append("user_id = any(%(user)s::text[])")  # per-user aggregates: rebuilt next build
        if t.scope == "memory" and "user_id" in cols and cols & REBUILT_COLUMNS:
            # the owner's candidates and memories (incremental models): the next build rebuilds them
            # from the owner's remaining extractions, as on DuckDB
            conds.append("user_id = any(%(user)s::text[])")
        for col in ID_COLUMNS:
            if col in cols:
                cond = f"{col}::text = any(%({col.split('_')[0]})s::text[])"
                if "user_id" in cols:  # ids are per user: never another user's row
                    cond += " and (user_id = any(%(user)s::text[]) or btrim(user_id, ' ') = any(%(user)s::text[]))"
                conds.append(cond)
        if "embedding" in cols and not cols & {"user_id", *ID_COLUMNS}:
            conds.append("embedding::vector in (select e from _forget_vectors)")
        if not conds:
            continue
        where = " or ".join(f"({c})" for c in conds)
        cur.execute(f"delete from {sql_ident(schema)}.{sql_ident(table)} where {where}", ids)
        if cur.rowcount:
            removed[table] = int(cur.rowcount)
    return removed


def _restat_owner(cur: Any, schema: str, tables: list[tuple[str, set[str], dict[str, str]]], owner: str) -> None:
    """Recompute the owner's BM25 statistics over its remaining term rows, in the forget's
    transaction (recall_shim/forget/common.py ``restat_statement``; as on DuckDB)."""
    cols = {name: c for name, c, _ in tables}
    if not {"memory_term_stats", "memory_term_index", "recall_queries"} <= set(cols):
        return
    cur.execute(f"select sql_text from {sql_ident(schema)}.recall_queries where query_name = 'tail_term_stats'")
    row = cur.fetchone()
    if row is None:
        return
    index = f"{sql_ident(schema)}.memory_term_index"
    cur.execute(f"create temp table tail_term_rows on commit drop as select memory_id, user_id, term, doc_len"
                f" from {index} with no data")
    cur.execute(f"insert into tail_term_rows select memory_id, user_id, term, doc_len from {index} where user_id = %s",
                [owner])
    cur.execute(restat_statement(f"{sql_ident(schema)}.memory_term_stats", cols["memory_term_stats"], row[0]))
    cur.execute("drop table tail_term_rows")


def forget_pg(conn: PgConnection, work_dir: Path, *, user_id: str | None = None, memory_id: str | None = None,
              actor: str | None = None, unbuilt: tuple[str, Sequence[str]] | None = None) -> ForgetReport:
    """Forget ``user_id`` (every row of that user landed up to now) or ``memory_id`` (that memory
    forever, with its source messages) in the PostgreSQL schema. Idempotent. ``unbuilt``: (owner,
    source message ids) of a memory the hot tail made from messages no build loaded yet
    (recall_shim/targets/postgres/tail.py), whose rows are only in the landing table."""

    user_id, memory_id, who = checked_forget_request(user_id, memory_id, actor)
    s = conn.schema
    with BuildLock(conn, "forget"):
        with conn.connect() as con:
            with con.cursor() as cur:
                tables = _tables(cur, s)
                targets, found = _find_targets(cur, s, tables, user_id, memory_id)
                if unbuilt is not None and targets.scope == "memory" and targets.user_id in (None, unbuilt[0]):
                    targets.user_id = unbuilt[0]  # its source messages are landed, not built yet
                    targets.message_ids.update(unbuilt[1])
                    targets.landing_ids |= _ids(cur, s, tables, "landing_id", "message_id", targets.message_ids,
                                                user=targets.user_id)
                    found = True
                forgotten_at = utc_now_iso()
                insert_rows(cur, s, LANDING_TABLES["forget"], FORGET_COLUMNS, [
                    tuple(f"pg:{forgotten_at}" if c == "_landing_file" else rec.get(c) for c in FORGET_COLUMNS)
                    for rec in tombstones(targets.scope, targets.user_id, memory_id, targets.memory_ids,
                                          targets.message_ids, forgotten_at)])
                removed = {f"warehouse:{k}": v for k, v in _delete_rows(cur, s, tables, targets).items()}
                if targets.scope == "memory" and targets.user_id is not None:
                    _restat_owner(cur, s, tables, targets.user_id)
                bump_generation(cur, s)  # with the deletes: no reader's cache outlives this COMMIT
                found = found or any(k.endswith("_landing") for k in removed)
                report = ForgetReport(
                    audit_id=uuid.uuid4().hex, scope=targets.scope, user_id=targets.user_id,
                    memory_id=memory_id, actor=who, forgotten_at=forgotten_at, found=found,
                    memories=len(targets.memory_ids) if found else 0, messages=len(targets.message_ids),
                    removed=removed)
                completed = utc_now_iso()
                cur.execute(f"insert into {sql_ident(s)}.forget_audit values (%s, %s, %s)",
                            [report.audit_id, completed, json.dumps(
                                {"action": "forget", "completed_at": completed, **report.as_dict()},
                                ensure_ascii=True, sort_keys=True)])
            con.commit()
        # plain VACUUM (no exclusive lock): the dead tuples become free space (module docstring)
        with conn.connect(autocommit=True) as vac:
            for key in removed:
                vac.execute(f"vacuum {sql_ident(s)}.{sql_ident(key.split(':', 1)[1])}")
    if work_dir.exists():
        shutil.rmtree(work_dir, ignore_errors=True)
        report.removed["dbt_target_and_logs"] = 1
    return report
