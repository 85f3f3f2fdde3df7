"""The three roles of a PostgreSQL store and their GRANT statements (docs/scaling_out.md, "Roles").

* **owner**: owns the schema; runs migrations (``agent-memory --target postgres migrate``),
  builds and forgets. The role that runs them; needs CREATE on the database for the first
  migration (it creates the schema).
* **writer**: ``remember`` / ``ingest`` only: USAGE on the schema, INSERT into the messages
  landing table, SELECT/INSERT/UPDATE on ``ingested_files`` (the ingest dedupe), SELECT on the
  version table (opening a store checks it). It cannot read memories, build or run DDL.
* **reader**: ``recall`` / ``prompt`` / ``similarity``: USAGE on the schema, SELECT on every table
  the owner's builds create (``ALTER DEFAULT PRIVILEGES``, so a rebuilt table is readable too)
  but not on the landing tables, ``ingested_files`` or ``forget_audit``; INSERT into the access
  landing table, so its recalls reinforce strength like the owner's (``record_access=False`` to
  skip). Without that INSERT (``--reader-no-access``) recall answers and warns AccessNotRecorded.

Role and schema names are quoted identifiers (``sql_ident``), never pasted as given.
"""

from __future__ import annotations

from recall_shim.common.sql import sql_ident
from recall_shim.errors import InvalidInput
from recall_shim.targets.postgres.migrations import VERSION_TABLE
from recall_shim.targets.postgres.privileges import pg_errors
from recall_shim.targets.postgres.server import LANDING_TABLES, PgConnection
from recall_shim.targets.postgres.tail_landing import TAIL_LANDING_FUNCTION

__all__ = ["grant_statements", "apply_grants", "NOT_FOR_READERS"]

#: shim tables a reader may not SELECT (raw landed rows, the ingest and forget records)
NOT_FOR_READERS = ("messages", "access", "forget")


def _check_role(name: str, what: str) -> str:
    if not isinstance(name, str) or not name or len(name) > 63 or "\x00" in name:
        raise InvalidInput(f"{what} role must be a PostgreSQL role name of 1 to 63 characters (got {str(name)[:70]!r})")
    return name


def grant_statements(schema: str, *, owner: str, writer: str | None = None, reader: str | None = None,
                     reader_records_access: bool = True) -> list[str]:
    """The GRANT statements giving ``writer`` and ``reader`` their privileges on ``schema``,
    whose tables ``owner`` creates (migrations, builds). Idempotent: run again after a migration
    that adds a table."""
    s = sql_ident(schema)
    t = {name: f"{s}.{sql_ident(name)}" for name in (*LANDING_TABLES.values(), "ingested_files", "forget_audit",
                                                     VERSION_TABLE)}
    out: list[str] = []
    if writer is not None:
        w = sql_ident(_check_role(writer, "writer"))
        out += [f"grant usage on schema {s} to {w}",
                f"grant select on {t[VERSION_TABLE]} to {w}",
                f"grant insert on {t[LANDING_TABLES['messages']]} to {w}",
                f"grant select, insert, update on {t['ingested_files']} to {w}"]
    if reader is not None:
        r = sql_ident(_check_role(reader, "reader"))
        o = sql_ident(_check_role(owner, "owner"))
        hidden = ", ".join([t[LANDING_TABLES[c]] for c in NOT_FOR_READERS] + [t["ingested_files"], t["forget_audit"]])
        out += [f"grant usage on schema {s} to {r}",
                f"grant select on all tables in schema {s} to {r}",
                f"alter default privileges for role {o} in schema {s} grant select on tables to {r}",
                f"revoke select on {hidden} from {r}"]
        # the hot tail's rows of the messages landing, through the owner's function (tail_landing.py)
        out.append(f"grant execute on function {s}.{TAIL_LANDING_FUNCTION}(timestamptz) to {r}")
        access = t[LANDING_TABLES["access"]]
        out.append(f"grant insert on {access} to {r}" if reader_records_access else f"revoke insert on {access} from {r}")
    if not out:
        raise InvalidInput("give a writer role, a reader role or both")
    return out


def apply_grants(conn: PgConnection, *, writer: str | None = None, reader: str | None = None,
                 reader_records_access: bool = True) -> list[str]:
    """Run :func:`grant_statements` in one transaction as ``conn``'s role (the owner, who owns
    the schema and its tables); returns the statements. The roles must exist."""
    statements = grant_statements(conn.schema, owner=conn.user, writer=writer, reader=reader,
                                  reader_records_access=reader_records_access)
    with pg_errors(conn, "grant privileges"):
        with conn.connect() as con:
            for role in (r for r in (writer, reader) if r is not None):
                if con.execute("select 1 from pg_roles where rolname = %s", [role]).fetchone() is None:
                    raise InvalidInput(f"no role {role!r} in this server: create it first (create role ... login)")
            for sql in statements:
                con.execute(sql)
            con.commit()
    return statements
