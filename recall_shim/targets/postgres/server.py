"""The PostgreSQL + pgvector backend's plumbing: a local server for tests and benchmarks, the
landing tables writers INSERT into, and the dbt ``postgres`` target's environment.

A store on PostgreSQL is named by a connection (host, port, user, database) and a schema. Writers
never touch the models: they INSERT rows, every value as text exactly like the DuckDB landing
files, into ``<schema>.session_log_landing`` (messages) and ``<schema>.recall_access_landing``
(recall accesses), each batch in one ordinary transaction, so any number of writers run at once
and while a build runs. ``dbt build --target postgres`` loads them incrementally (the
``landing_rows`` macro). The tables are created by the shim's migrations (migrations.py), never
when a store is opened. See docs/scaling_out.md.

:class:`LocalPostgres`, the throwaway server from the ``pgserver`` wheel for tests, benchmarks
and ``agent-memory pg-local``, lives in local_server.py.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from recall_shim.errors import BackendUnavailable, ConnectionFailed, InvalidInput
from recall_shim.write.landing import utc_now_iso
from recall_shim.common.sql import sql_ident
from recall_shim.common.paths import project_dir

__all__ = ["PgConnection", "SSL_MODES", "check_pg_name", "one_line", "land_messages", "land_access", "insert_rows",
           "message_values", "LANDING_TABLES", "MESSAGE_COLUMNS", "FORGET_COLUMNS"]

_PG_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

#: where the landing source is declared; its tables' identifiers are the PostgreSQL landing tables
LANDING_SOURCES = Path("models") / "staging" / "landing" / "_landing__sources.yml"


class _LandingTables(Mapping[str, str]):
    """Landing channel -> table: the ``identifier`` of each table of the ``landing`` source
    (models/staging/landing/_landing__sources.yml), the one definition dbt's ``source()`` reads
    too; read when first used and checked."""

    def _tables(self) -> dict[str, str]:
        import yaml  # a dependency of dbt-core

        path = project_dir() / LANDING_SOURCES
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        tables = {t.get("name"): t.get("identifier") for s in doc.get("sources") or [] if s.get("name") == "landing"
                  for t in s.get("tables") or []}
        if sorted(tables) != ["access", "forget", "messages"] or not all(
                isinstance(v, str) and _PG_NAME.fullmatch(v) for v in tables.values()):
            raise InvalidInput(f"{path}: source landing must declare messages, access and forget, each with an"
                               f" identifier that is a PostgreSQL name ({_PG_NAME.pattern})")
        return tables

    def __getitem__(self, channel: str) -> str:
        return self._tables()[channel]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables())

    def __len__(self) -> int:
        return len(self._tables())


#: landing channel -> table
LANDING_TABLES: Mapping[str, str] = _LandingTables()

MESSAGE_COLUMNS = ("landing_id", "user_id", "session_id", "agent_id", "msg_seq", "role", "content",
                    "content_invalid_utf8", "ts", "message_id", "landed_at", "door_reason", "landing_seq",
                    "_landing_file")
_ACCESS_COLUMNS = ("event_id", "memory_id", "user_id", "query_id", "accessed_at", "_landing_file")
FORGET_COLUMNS = ("tombstone_id", "scope", "user_id", "memory_id", "forgotten_at", "_landing_file", "message_id")


#: libpq's sslmode values (https://www.postgresql.org/docs/16/libpq-ssl.html)
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


@dataclass(frozen=True)
class PgConnection:
    """Where a PostgreSQL store lives. ``host`` may be a Unix socket folder. ``sslmode`` and
    ``sslrootcert`` are libpq's (default ``prefer`` and none: TLS when the server offers it,
    without verifying the certificate; ``verify-full`` with the CA file checks the server)."""

    host: str
    port: int = 5432
    user: str = "postgres"
    dbname: str = "agent_memory"
    schema: str = "agent_memory"
    password: str = field(default="", repr=False)
    sslmode: str = "prefer"
    sslrootcert: str = ""

    def __post_init__(self) -> None:
        # the dbt postgres target writes the schema unquoted (target.schema in macros/*.sql)
        check_pg_name(self.schema, "schema")
        check_pg_name(self.dbname, "dbname")
        if self.sslmode not in SSL_MODES:
            raise InvalidInput(f"sslmode must be one of {', '.join(SSL_MODES)} (got {str(self.sslmode)[:40]!r};"
                               " AGENT_MEMORY_PG_SSLMODE)")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "PgConnection":
        """The connection the dbt ``postgres`` target reads (AGENT_MEMORY_PG_* variables)."""
        e = os.environ if env is None else env
        return cls(host=e.get("AGENT_MEMORY_PG_HOST", "localhost"),
                   port=int(e.get("AGENT_MEMORY_PG_PORT", "5432")),
                   user=e.get("AGENT_MEMORY_PG_USER", "postgres"),
                   dbname=e.get("AGENT_MEMORY_PG_DBNAME", "agent_memory"),
                   schema=e.get("AGENT_MEMORY_PG_SCHEMA", "agent_memory"),
                   password=e.get("AGENT_MEMORY_PG_PASSWORD", ""),
                   sslmode=e.get("AGENT_MEMORY_PG_SSLMODE") or "prefer",
                   sslrootcert=e.get("AGENT_MEMORY_PG_SSLROOTCERT", ""))

    def dbt_env(self) -> dict[str, str]:
        """Environment variables that point the dbt ``postgres`` target at this store."""
        return {"AGENT_MEMORY_PG_HOST": self.host, "AGENT_MEMORY_PG_PORT": str(self.port),
                "AGENT_MEMORY_PG_USER": self.user, "AGENT_MEMORY_PG_DBNAME": self.dbname,
                "AGENT_MEMORY_PG_SCHEMA": self.schema, "AGENT_MEMORY_PG_PASSWORD": self.password,
                "AGENT_MEMORY_PG_SSLMODE": self.sslmode, "AGENT_MEMORY_PG_SSLROOTCERT": self.sslrootcert}

    def connect_kwargs(self) -> dict[str, Any]:
        """The keyword arguments ``psycopg.connect`` gets (libpq connection parameters)."""
        kwargs: dict[str, Any] = {"host": self.host, "port": self.port, "user": self.user, "dbname": self.dbname,
                                  "password": self.password or None, "sslmode": self.sslmode}
        if self.sslrootcert:
            kwargs["sslrootcert"] = self.sslrootcert
        return kwargs

    def connect(self, autocommit: bool = False) -> Any:
        """A new psycopg connection (the caller closes it). A server that cannot be reached or
        refuses the login raises ConnectionFailed with a one-line message."""
        psycopg = _psycopg()
        try:
            return psycopg.connect(autocommit=autocommit, **self.connect_kwargs())
        except psycopg.OperationalError as exc:
            raise ConnectionFailed(f"cannot connect to PostgreSQL at {self.host}:{self.port} as {self.user}"
                                   f" (database {self.dbname}): {one_line(str(exc))}") from None


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise BackendUnavailable("the postgres backend needs psycopg: pip install 'agent-memory[postgres]'") from exc
    return psycopg


def one_line(message: str, limit: int = 300) -> str:
    """A server or libpq message on one line (libpq's hints follow on tab-indented lines)."""
    text = "; ".join(part.strip() for part in message.splitlines() if part.strip())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_pg_name(name: str, what: str) -> str:
    """``name`` if it is a plain PostgreSQL name (lower-case letters, digits, _; at most 63);
    raises InvalidInput otherwise, so a schema or database name never needs quoting in SQL."""
    if not isinstance(name, str) or not _PG_NAME.fullmatch(name):
        raise InvalidInput(f"PostgreSQL {what} must match {_PG_NAME.pattern} (got {str(name)[:70]!r})")
    return name


def land_messages(conn: PgConnection, records: Iterable[Mapping[str, Any]]) -> int:
    """INSERT landing records (recall_shim/write/door.py, exactly like the landing files) in one
    transaction; returns how many landed. Safe to call from any number of writers at once."""
    return _insert(conn, LANDING_TABLES["messages"], MESSAGE_COLUMNS, message_values(records))


def land_access(conn: PgConnection, events: Iterable[Mapping[str, Any]]) -> int:
    """INSERT recall access events (event_id, memory_id, user_id, query_id, accessed_at) in one
    transaction; returns how many landed."""
    batch = f"pg:{utc_now_iso()}-{uuid.uuid4().hex[:12]}"
    values = [tuple(None if e.get(c) is None else str(e.get(c)) for c in _ACCESS_COLUMNS[:-1]) + (batch,)
              for e in events]
    return _insert(conn, LANDING_TABLES["access"], _ACCESS_COLUMNS, values)


def _insert(conn: PgConnection, table: str, columns: tuple[str, ...], values: list[tuple[Any, ...]]) -> int:
    if not values:
        return 0
    with conn.connect() as con:  # one transaction: all rows land or none
        with con.cursor() as cur:
            insert_rows(cur, conn.schema, table, columns, values)
        con.commit()
    return len(values)


def insert_rows(cur: Any, schema: str, table: str, columns: tuple[str, ...], values: list[tuple[Any, ...]]) -> None:
    """INSERT ``values`` with the caller's cursor (inside the caller's transaction)."""
    # NUL cannot be stored in PostgreSQL text: it is replaced like invalid UTF-8 (U+FFFD).
    values = [tuple(v.replace("\x00", "\ufffd") if isinstance(v, str) else v for v in row) for row in values]
    sql = (f'insert into {sql_ident(schema)}.{table} ({", ".join(columns)}) '
           f'values ({", ".join(["%s"] * len(columns))})')
    cur.executemany(sql, values)


def message_values(records: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """Landing records (recall_shim/write/door.py) as tuples of MESSAGE_COLUMNS, one batch name."""
    batch = f"pg:{utc_now_iso()}-{uuid.uuid4().hex[:12]}"
    return [tuple(rec.get(c) if c != "_landing_file" else batch for c in MESSAGE_COLUMNS) for rec in records]
