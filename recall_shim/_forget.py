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

Values are always bound parameters or rows of temporary tables; only identifiers read from the
catalog and file paths are quoted into SQL text.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import duckdb

from ._errors import InvalidInput, StoreBusy
from ._landing import utc_now_iso, write_landing_file
from ._locks import file_lock
from ._paths import EMPTY_MARKER, StorePaths
from ._index import build_index
from ._terms import build_term_postings
from ._tombstones import message_tombstones, tombstones
from ._serving import ready_snapshots
from ._snapshot import LAYER_TABLES, SNAPSHOT_ORDER, attach_snapshot, layer_alias, snapshot_layers

ACTOR_ENV = "AGENT_MEMORY_ACTOR"
ID_COLUMNS = ("memory_id", "message_id", "landing_id")
# Tables with these columns (the incremental int_memory_candidates and int_memories_consolidated)
# lose all rows of a forgotten memory's owner; the next build rebuilds that user from its
# extractions, so merged mentions, provenance and supersession are as if the memory never was.
REBUILT_COLUMNS = frozenset({"candidate_id", "candidate_ids"})
# Rebuilt from the tombstone files on every build; never purged by a forget.
KEEP_TABLES = frozenset({"stg_forget_requests"})


@dataclass(frozen=True)
class ForgetReport:
    """What one ``forget`` did. ``removed`` counts rows (or files) per relation or landing folder."""

    audit_id: str
    scope: str
    user_id: str | None
    memory_id: str | None
    actor: str
    forgotten_at: str
    found: bool
    memories: int
    messages: int
    removed: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Targets:
    scope: str
    user_id: str | None          # user scope: the user; memory scope: the owner (if known)
    memory_ids: set[str]
    message_ids: set[str]        # message_ids of user_id's rows only (a message is (user_id, message_id))
    landing_ids: set[str]
    # message_ids of the user's rows found only in the landing files (tombstoned against replays)
    landed_message_ids: set[str] = field(default_factory=set)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _user_matches(value: Any, user_id: str) -> bool:
    # the same rule as the SQL below and macros/data_protection.sql: exact, or equal once spaces
    # are trimmed (rows rejected as invalid_user_id for surrounding spaces go too)
    return isinstance(value, str) and (value == user_id or value.strip(" ") == user_id)


def _check_id(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{name} is not valid Unicode (lone surrogate)") from None
    return value


def default_actor() -> str:
    env = os.environ.get(ACTOR_ENV)
    if env:
        return env
    try:
        return getpass.getuser()
    except Exception:  # no login name in this environment
        return "unknown"


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
        raise StoreBusy(f"cannot open {db} for writing (another process holds it): {exc}") from None


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
            f"select distinct {sel} from {_ident(schema)}.{_ident(table)} where {cond}", params
        ).fetchall()
        out.update(r[0] for r in rows if r[0] is not None)
    return out


def _find_targets(con: duckdb.DuckDBPyConnection | None, user_id: str | None,
                  memory_id: str | None) -> tuple[_Targets, bool]:
    if memory_id is None:
        assert user_id is not None
        t = _Targets("user", user_id, set(), set(), set())
        if con is None:
            return t, False
        tables = _tables(con)
        t.memory_ids = _ids(con, tables, "memory_id", "user_id", [user_id])
        t.message_ids = _ids(con, tables, "message_id", "user_id", [user_id])
        t.landing_ids = _ids(con, tables, "landing_id", "user_id", [user_id])
        return t, bool(t.memory_ids or t.message_ids or t.landing_ids)

    t = _Targets("memory", None, {memory_id}, set(), set())
    if con is None:
        return t, False
    tables = _tables(con)
    owners = _ids(con, tables, "user_id", "memory_id", [memory_id])
    if len(owners) > 1:
        raise InvalidInput(f"memory {memory_id!r} has several owners in the warehouse: {sorted(owners)}")
    owner = next(iter(owners), None)
    if user_id is not None and owner is not None and owner != user_id:
        raise InvalidInput(f"memory {memory_id!r} does not belong to user {user_id!r}")
    t.user_id = owner if owner is not None else user_id
    if t.user_id is None:
        return t, False
    t.message_ids = _ids(con, tables, "source_message_ids", "memory_id", [memory_id], user=t.user_id)
    t.landing_ids = _ids(con, tables, "landing_id", "message_id", t.message_ids, user=t.user_id)
    # the owner's memories whose every source message goes too are forgotten with it
    # (docs/data_protection.md)
    for schema, table, cols in tables:
        if {"memory_id", "source_message_ids", "user_id"} <= cols and t.message_ids:
            rows = con.execute(
                f"select distinct memory_id from {_ident(schema)}.{_ident(table)}"
                " where user_id = $2 and len(source_message_ids) > 0"
                " and list_has_all($1::varchar[], source_message_ids)",
                [sorted(t.message_ids), t.user_id],
            ).fetchall()
            t.memory_ids.update(r[0] for r in rows)
    return t, owner is not None


def _load_targets(con: duckdb.DuckDBPyConnection, t: _Targets) -> None:
    for name, values in (("memory", t.memory_ids), ("message", t.message_ids), ("landing", t.landing_ids),
                         ("user", {t.user_id} if t.user_id else set())):
        con.execute(f"create or replace temp table _forget_{name}_ids (id varchar)")
        if values:
            con.execute(f"insert into _forget_{name}_ids select unnest($1::varchar[])", [sorted(values)])


def _delete_rows(con: duckdb.DuckDBPyConnection, t: _Targets) -> dict[str, int]:
    """Delete the targets' rows from every base table; returns rows removed per table."""
    _load_targets(con, t)
    tables = _tables(con)
    # embeddings held without any id (keyed by content hash) go when no remaining memory has them
    with_vectors = [(s, n) for s, n, cols in tables if {"memory_id", "embedding"} <= cols]
    con.execute("create or replace temp table _forget_vectors (e float[])")
    if with_vectors:
        gone = " union ".join(
            f"select embedding::float[] from {_ident(s)}.{_ident(n)} where memory_id in (select id from _forget_memory_ids)"
            for s, n in with_vectors)
        kept = " union ".join(
            f"select embedding::float[] from {_ident(s)}.{_ident(n)} where memory_id not in (select id from _forget_memory_ids)"
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
        n = con.execute(f"delete from {_ident(schema)}.{_ident(table)} where {where}").fetchone()
        count = int(n[0]) if n else 0
        if count:
            removed[table] = count
    return removed


def _compact(con: duckdb.DuckDBPyConnection, src: Path, dest: Path) -> None:
    """Copy the connection's database into a fresh file ``dest`` (only live rows; no freed
    blocks), close the connection, and atomically put the copy in place. ``src`` may equal
    ``dest``."""
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.forget-tmp")
    catalog = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
    con.execute("checkpoint")
    con.execute(f"attach {_literal(tmp)} as forget_fresh")
    try:
        con.execute(f"copy from database {_ident(catalog)} to forget_fresh")
        con.execute("checkpoint forget_fresh")
    finally:
        con.execute("detach forget_fresh")
        con.close()
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, dest)
    for stale in (Path(str(dest) + ".wal"), Path(str(tmp) + ".wal")):
        stale.unlink(missing_ok=True)
    if src != dest:
        src.unlink(missing_ok=True)
        Path(str(src) + ".wal").unlink(missing_ok=True)
    _fsync_dir(dest.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- landing files and snapshots -------------------------------------------------------------

def _purge_landing(paths: StorePaths, t: _Targets) -> dict[str, int]:
    removed = {"landing:messages": 0, "landing:access": 0, "landing:stale_tmp_files": 0}

    def drop_message(rec: dict[str, Any]) -> bool:
        # only rows of the user (a memory's owner): message ids are unique per user, not globally
        if not _user_matches(rec.get("user_id"), t.user_id or ""):
            return False
        mid = rec.get("message_id")
        if t.scope == "user":
            if isinstance(mid, str) and mid.strip() and mid.strip() not in t.message_ids:
                t.landed_message_ids.add(mid.strip())
            return True
        return rec.get("landing_id") in t.landing_ids or (isinstance(mid, str) and mid.strip() in t.message_ids)

    def drop_access(rec: dict[str, Any]) -> bool:
        if not _user_matches(rec.get("user_id"), t.user_id or ""):
            return False
        return t.scope == "user" or rec.get("memory_id") in t.memory_ids

    for folder, key, drop in ((paths.messages, "landing:messages", drop_message),
                              (paths.access, "landing:access", drop_access)):
        if not folder.is_dir():
            continue
        changed = False
        for f in sorted(folder.iterdir()):
            if f.name.startswith(".") and ".tmp" in f.name:
                # a writer that died before its rename: never acknowledged, never loaded
                f.unlink(missing_ok=True)
                removed["landing:stale_tmp_files"] += 1
                changed = True
                continue
            if f.name == EMPTY_MARKER or not f.name.endswith(".jsonl") or not f.is_file():
                continue
            kept: list[bytes] = []
            dropped = 0
            for line in f.read_bytes().splitlines(keepends=True):
                try:
                    rec = json.loads(line) if line.strip() else None
                except ValueError:
                    rec = None
                if isinstance(rec, dict) and drop(rec):
                    dropped += 1
                else:
                    kept.append(line)
            if not dropped:
                continue
            removed[key] += dropped
            changed = True
            if kept:
                tmp = folder / f".{f.name}.forget.tmp"
                with open(tmp, "wb") as fh:
                    fh.write(b"".join(kept))
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, f)
            else:
                f.unlink()
        if changed:
            _fsync_dir(folder)
    return removed


def _materialize_base(snapshot: Path, work: Path, file: str) -> None:
    """Write ``snapshot`` (a base or a delta over layers) into ``work`` as a base snapshot named
    ``file``: its views materialized into tables, every other table copied, and a serving_layers
    listing only itself (watermark kept), so nothing of the older layers is needed afterwards."""
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
        for name in names:
            if name not in LAYER_TABLES:
                con.execute(f"create table main.{_ident(name)} as select * from forget_src.main.{_ident(name)}"
                            f" {SNAPSHOT_ORDER.get(name, '')}")
        con.execute("create table main.serving_layers as select 0::integer as layer, $1::varchar as file,"
                    " $2::varchar as alias, (select count(*) from main.long_term_memory)::bigint as rows,"
                    " $3::timestamp as watermark, 'base'::varchar as kind", [file, layer_alias(file), watermark])
    finally:
        con.close()


def _purge_serving(paths: StorePaths, t: _Targets) -> dict[str, int]:
    """Publish a purged copy of the newest snapshot, then delete every other snapshot file."""
    removed: dict[str, int] = {}
    # the newest snapshot whose layer files all exist (one that is not served is not purged from)
    ready = [s for s in ready_snapshots(paths) if all((paths.serving / f).exists() for f in snapshot_layers(s))]
    new_name: str | None = None
    if ready:
        newest = ready[-1]
        stamp = utc_now_iso().replace("-", "").replace(":", "").replace(" ", "T").replace(".", "")
        new_name = f"snap-{stamp}-forget{uuid.uuid4().hex[:6]}"
        work = paths.serving / f".{new_name}.work.duckdb"
        _materialize_base(newest, work, f"{new_name}.duckdb")
        con = duckdb.connect(str(work))
        try:
            for table, n in _delete_rows(con, t).items():
                removed[f"serving:{table}"] = n
            con.execute("update serving_layers set rows = (select count(*) from long_term_memory)")
            _compact(con, work, paths.serving / f"{new_name}.duckdb")
        finally:
            try:
                con.close()
            except duckdb.Error:
                pass
        try:  # a fresh serving index: a new heavy generation, no file (or hard link) of the old ones
            stats = build_index(paths.serving / f"{new_name}.duckdb")
            build_term_postings(paths.serving / f"{new_name}.duckdb")  # the hybrid fusion's lexical leg
            removed["serving:index_rows"] = int(stats.get("rows", 0))
        except Exception:  # noqa: BLE001 - as at build: without an index the snapshot's statement serves
            shutil.rmtree(paths.serving / f"{new_name}.index", ignore_errors=True)
        marker = paths.serving / f"{new_name}.ready"
        with open(marker, "w", encoding="ascii") as fh:
            fh.write("invocation_id\nforget\n")
            fh.flush()
            os.fsync(fh.fileno())
    dropped = 0
    if paths.serving.is_dir():
        for f in sorted(paths.serving.iterdir(), key=lambda p: not p.name.endswith(".ready")):
            if new_name is not None and f.name.startswith(new_name + "."):
                continue
            if f.name.startswith(("snap-", ".snap-")):
                if f.is_dir():  # a snapshot's serving index (vectors and content payload)
                    shutil.rmtree(f, ignore_errors=True)
                else:
                    f.unlink(missing_ok=True)
                dropped += f.name.endswith(".duckdb")
        _fsync_dir(paths.serving)
    removed["serving:snapshots_dropped"] = dropped
    return removed


def _append_audit(path: Path, record: dict[str, Any]) -> None:
    line = json.dumps(record, ensure_ascii=True, sort_keys=True) + "\n"
    with open(path, "a", encoding="ascii") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


# --- the operation ---------------------------------------------------------------------------

def forget(paths: StorePaths, *, user_id: str | None = None, memory_id: str | None = None,
           actor: str | None = None) -> ForgetReport:
    """Forget ``user_id`` (every row of that user landed up to now) or ``memory_id`` (that memory
    forever, with its source messages) in every file of the store. Idempotent: run it again
    after an interruption."""
    if user_id is None and memory_id is None:
        raise InvalidInput("forget needs user_id or memory_id")
    if user_id is not None:
        user_id = _check_id(user_id, "user_id")
    if memory_id is not None:
        memory_id = _check_id(memory_id, "memory_id")
    who = _check_id(actor, "actor") if actor is not None else default_actor()
    paths.ensure()
    with file_lock(paths.build_lock, exclusive=True):
        con = _open_rw(paths.db) if paths.db.exists() else None
        try:
            targets, found = _find_targets(con, user_id, memory_id)
            with file_lock(paths.write_lock, exclusive=True):
                forgotten_at = utc_now_iso()
                write_landing_file(paths.forget, tombstones(
                    targets.scope, targets.user_id, memory_id, targets.memory_ids, targets.message_ids, forgotten_at))
                removed = _purge_landing(paths, targets)
                # ids met only in the landing files (not built yet): tombstoned against replays too
                write_landing_file(paths.forget, message_tombstones(
                    targets.user_id, targets.landed_message_ids, forgotten_at))
            found = found or bool(removed["landing:messages"] or removed["landing:access"])
            if con is not None:
                removed.update({f"warehouse:{k}": v for k, v in _delete_rows(con, targets).items()})
                _compact(con, paths.db, paths.db)
                con = None
        finally:
            if con is not None:
                con.close()
        removed.update(_purge_serving(paths, targets))
        if paths.dbt_dir.exists():
            shutil.rmtree(paths.dbt_dir, ignore_errors=True)
            removed["dbt_target_and_logs"] = 1
        report = ForgetReport(
            audit_id=uuid.uuid4().hex, scope=targets.scope, user_id=targets.user_id, memory_id=memory_id,
            actor=who, forgotten_at=forgotten_at, found=found, memories=len(targets.memory_ids),
            messages=len(targets.message_ids), removed=removed,
        )
        _append_audit(paths.audit, {"action": "forget", "completed_at": utc_now_iso(), **report.as_dict()})
    return report
