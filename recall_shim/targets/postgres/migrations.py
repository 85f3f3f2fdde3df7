"""Versioned, idempotent migrations of what the shim owns in a PostgreSQL store's schema: the
schema itself, the landing tables writers INSERT into (messages, recall accesses, forget
tombstones), ``ingested_files``, ``forget_audit``, ``build_lock`` (build_lock.py), ``store_generation`` (generation.py), the hot tail's ``tail_landing`` function (tail_landing.py), and the columns added to them later. The
models are dbt's (``dbt build --target postgres``); ``embedding_cache`` and the SQL functions are
created by the build's on-run-start hook (``prepare_target``).

Each step has a number and a name and is applied once per schema, in order, recorded in
``<schema>.shim_migrations(version, applied_at, name)``. :func:`migrate` applies the missing
steps in one transaction under an advisory transaction lock (concurrent migrators take turns;
the second finds nothing to do). Every step is idempotent (``if not exists``, columns added only
when missing), so a schema created before the version table existed (by ``ensure_landing``) is
adopted: its steps run as no-ops and are recorded.

Opening a store runs :func:`check_schema`: one SELECT of the version. When the schema is behind
and the role may create in it (or, without the schema, in the database) -- the owner's first use
-- it migrates; otherwise it raises :class:`StoreNotMigrated`. Writers and readers never run DDL.

A step's SQL is frozen once released: a later change is a new step. Identifiers are quoted with
``sql_ident``; values are bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from recall_shim.common.sql import sql_ident
from recall_shim.errors import StoreNotMigrated
from recall_shim.targets.postgres.build_lock import create_lock_table
from recall_shim.targets.postgres.generation import create_generation_table
from recall_shim.targets.postgres.privileges import pg_errors
from recall_shim.targets.postgres.server import LANDING_TABLES, PgConnection
from recall_shim.targets.postgres.tail_landing import create_tail_landing

__all__ = ["Migration", "MIGRATIONS", "LATEST_VERSION", "VERSION_TABLE", "MigrationReport", "migrate",
           "schema_version", "check_schema", "may_migrate", "MIGRATE_HINT"]

MIGRATE_LOCK_KEY = 7_301_733  # pg_advisory_xact_lock key of migrations (ensure_landing's before them)
VERSION_TABLE = "shim_migrations"
MIGRATE_HINT = "run `agent-memory --target postgres migrate` as the store's owner"


@dataclass(frozen=True)
class Migration:
    """One numbered step: ``apply(cursor, schema)`` runs idempotent DDL in the caller's transaction."""

    version: int
    name: str
    apply: Callable[[Any, str], None]


@dataclass(frozen=True)
class MigrationReport:
    """What :func:`migrate` did: the schema, the steps it applied now (version, name), the
    version the schema is at afterwards."""

    schema: str
    applied: list[tuple[int, str]]
    version: int

    def as_dict(self) -> dict[str, Any]:
        return {"schema": self.schema, "applied": [{"version": v, "name": n} for v, n in self.applied],
                "version": self.version}


def _table(schema: str, name: str) -> str:
    return f"{sql_ident(schema)}.{sql_ident(name)}"


def _landing_tables(cur: Any, s: str) -> None:
    text_cols = ("landing_id", "user_id", "session_id", "agent_id", "msg_seq", "role", "content")
    cur.execute(f"create table if not exists {_table(s, LANDING_TABLES['messages'])} ("
                + ", ".join(f"{c} text" for c in text_cols)
                + ", content_invalid_utf8 boolean, ts text, message_id text, landed_at text, _landing_file text,"
                  " primary key (landing_id))")
    cur.execute(f"create table if not exists {_table(s, LANDING_TABLES['access'])} (event_id text, memory_id text,"
                " user_id text, query_id text, accessed_at text, _landing_file text, primary key (event_id))")
    cur.execute(f"create table if not exists {_table(s, LANDING_TABLES['forget'])} (tombstone_id text, scope text,"
                " user_id text, memory_id text, forgotten_at text, _landing_file text, primary key (tombstone_id))")


def _ingested_files(cur: Any, s: str) -> None:
    # sha256 of every file `ingest` landed (skip a file landed before unless forced)
    cur.execute(f"create table if not exists {_table(s, 'ingested_files')} (digest text primary key, file text,"
                " n_rows bigint, landed_at text)")


def _forget_audit(cur: Any, s: str) -> None:
    # forget's audit trail: ids and counts only, never content (docs/data_protection.md)
    cur.execute(f"create table if not exists {_table(s, 'forget_audit')} (audit_id text primary key,"
                " completed_at text, record text)")


def _add_text_columns(*columns: tuple[str, str]) -> Callable[[Any, str], None]:
    """A step adding text columns (channel, column) when missing. ALTER only when missing: it
    takes an exclusive lock that would make writers wait for a build."""
    def apply(cur: Any, s: str) -> None:
        for channel, column in columns:
            table = LANDING_TABLES[channel]
            if cur.execute("select 1 from information_schema.columns where table_schema = %s and table_name = %s"
                           " and column_name = %s", [s, table, column]).fetchone() is None:
                cur.execute(f"alter table {_table(s, table)} add column {sql_ident(column)} text")
    return apply


#: the steps, in order; append only (a released step's SQL never changes)
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "landing tables: messages, recall accesses, forget tombstones", _landing_tables),
    Migration(2, "ingested_files: sha256 of every ingested file", _ingested_files),
    Migration(3, "forget_audit: the forget audit trail", _forget_audit),
    Migration(4, "messages landing: door_reason and landing_seq columns",
              _add_text_columns(("messages", "door_reason"), ("messages", "landing_seq"))),
    Migration(5, "forget landing: message_id column", _add_text_columns(("forget", "message_id"))),
    Migration(6, "build_lock: the lease row builds and forgets take turns on", create_lock_table),
    Migration(7, "store_generation: the counter builds and forgets move (readers' per-user caches)",
              create_generation_table),
    Migration(8, "hot tail: messages landing arrived_at (indexed) and the function tail_landing readers call",
              create_tail_landing),
)
LATEST_VERSION = MIGRATIONS[-1].version


def schema_version(con: Any, schema: str) -> int:
    """The highest migration applied to ``schema`` (0: no version table, or no schema): SELECTs
    only, so any role with USAGE on the schema and SELECT on the version table may ask."""
    if con.execute("select to_regclass(%s)", [_table(schema, VERSION_TABLE)]).fetchone()[0] is None:
        return 0
    row = con.execute(f"select coalesce(max(version), 0) from {_table(schema, VERSION_TABLE)}").fetchone()
    return int(row[0])


def may_migrate(con: Any, schema: str) -> bool:
    """Whether the connected role may create in ``schema`` (or, if it does not exist yet, create
    schemas in the database): the owner may, a writer or reader granted by
    recall_shim/targets/postgres/roles.py may not."""
    if con.execute("select to_regnamespace(%s)", [sql_ident(schema)]).fetchone()[0] is None:
        return bool(con.execute("select has_database_privilege(current_database(), 'CREATE')").fetchone()[0])
    return bool(con.execute("select has_schema_privilege(%s, 'CREATE')", [schema]).fetchone()[0])


def migrate(conn: PgConnection) -> MigrationReport:
    """Apply every missing step to ``conn.schema`` in one transaction (all or none); re-running
    is a no-op. Raises PermissionDenied when the role may not create in the schema."""
    s = conn.schema
    with pg_errors(conn, "migrate"), conn.connect() as con:
        with con.cursor() as cur:
            cur.execute("select pg_advisory_xact_lock(%s)", [MIGRATE_LOCK_KEY])
            # create only when missing: CREATE SCHEMA checks the database privilege before IF NOT EXISTS
            if cur.execute("select to_regnamespace(%s)", [sql_ident(s)]).fetchone()[0] is None:
                cur.execute(f"create schema {sql_ident(s)}")
            cur.execute(f"create table if not exists {_table(s, VERSION_TABLE)} (version int primary key,"
                        " applied_at timestamptz not null default now(), name text not null)")
            done = {int(r[0]) for r in cur.execute(f"select version from {_table(s, VERSION_TABLE)}").fetchall()}
            applied: list[tuple[int, str]] = []
            for step in MIGRATIONS:
                if step.version in done:
                    continue
                step.apply(cur, s)
                cur.execute(f"insert into {_table(s, VERSION_TABLE)} (version, name) values (%s, %s)",
                            [step.version, step.name])
                applied.append((step.version, step.name))
            version = max(done | {v for v, _ in applied} | {0})
        con.commit()
    return MigrationReport(s, applied, version)


def check_schema(conn: PgConnection) -> int:
    """What opening a store does: SELECT the schema's version; when it is behind, migrate if
    this role may (the owner's first use), else raise StoreNotMigrated. Returns the version."""
    with pg_errors(conn, "open the store"), conn.connect(autocommit=True) as con:
        version = schema_version(con, conn.schema)
        if version >= LATEST_VERSION:
            return version
        allowed = may_migrate(con, conn.schema)
    if not allowed:
        raise StoreNotMigrated(f"schema {conn.schema} is at migration {version} of {LATEST_VERSION} and role "
                               f"{conn.user} may not migrate it: {MIGRATE_HINT}")
    return migrate(conn).version
