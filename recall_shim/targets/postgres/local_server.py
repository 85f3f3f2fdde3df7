"""The bundled PostgreSQL + pgvector server (the ``pgserver`` wheel): :class:`LocalPostgres`, a
throwaway server for tests and benchmarks, and ``agent-memory pg-local start|stop|status``, the
same server as a one-command local trial.

:class:`LocalPostgres` starts PostgreSQL 16 with pgvector. As root, pgserver runs the server as a
system user ``pgserver`` (created with ``useradd`` on first use) and opens the parent folders of
its data folder for that user to traverse; it listens on a Unix socket in the data folder only,
never on TCP.

``pg-local``: the server runs as a background process that outlives the command, in a data folder (default
``<data dir>/pg-local``), and listens on a Unix socket only (no TCP port; on Windows pgserver
uses 127.0.0.1). Its superuser ``postgres`` logs in over that socket without a password (trust
authentication, local connections only), so no password is ever printed or logged: the commands
print the ``AGENT_MEMORY_PG_*`` lines to ``export``. ``stop`` stops the server and keeps the
data; delete the folder to start over. A trial, not a deployment (docs/scaling_out.md).
"""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

from recall_shim.common.paths import data_dir
from recall_shim.common.sql import sql_ident
from recall_shim.errors import BackendUnavailable
from recall_shim.targets.postgres.migrations import migrate
from recall_shim.targets.postgres.server import PgConnection, check_pg_name

__all__ = ["LocalPostgres", "default_dir", "start_local", "local_status", "stop_local", "export_lines"]

_DBNAME = "agent_memory"
_SCHEMA = "agent_memory"


START_ATTEMPTS = 3

class LocalPostgres:
    """A PostgreSQL server with pgvector from the ``pgserver`` wheel, in ``pgdata``.

    ``start()`` creates database ``dbname`` (TimeZone UTC) with the ``vector`` extension and
    returns its :class:`PgConnection`; ``stop()`` stops the server and deletes ``pgdata``. With
    ``keep=True`` (``agent-memory pg-local``) the server outlives this process and ``stop()``
    stops it, keeping ``pgdata`` (below).
    """

    def __init__(self, pgdata: Path, dbname: str = "agent_memory", schema: str = "agent_memory", *,
                 keep: bool = False) -> None:
        check_pg_name(schema, "schema")
        check_pg_name(dbname, "dbname")
        self.pgdata = Path(pgdata)
        self.dbname = dbname
        self.schema = schema
        self.keep = keep
        self._server: Any = None

    def start(self) -> PgConnection:
        try:
            import pgserver
        except ImportError as exc:
            raise BackendUnavailable("pgserver is not installed: pip install 'agent-memory[postgres-local]'") from exc
        logging.getLogger("pgserver").setLevel(logging.WARNING)
        self.pgdata.mkdir(parents=True, exist_ok=True)
        for attempt in range(START_ATTEMPTS):
            # pgserver gives pg_ctl 10 s: on a loaded machine the postmaster can be up after that,
            # and the next attempt finds it running (its postmaster.pid) instead of starting one
            try:
                self._server = pgserver.get_server(self.pgdata, cleanup_mode=None if self.keep else "delete")
                break
            except Exception as exc:  # pgserver raises bare subprocess/assertion errors
                if attempt + 1 < START_ATTEMPTS:
                    continue
                log = self.pgdata / "log"
                detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise BackendUnavailable(f"pgserver could not start PostgreSQL in {self.pgdata}: {exc}\n{detail}") from exc
        info = self._server.get_postmaster_info()
        admin = PgConnection(host=str(info.socket_dir), port=int(info.port or 5432), dbname="postgres",
                             schema=self.schema)
        with admin.connect(autocommit=True) as con:
            exists = con.execute("select 1 from pg_database where datname = %s", [self.dbname]).fetchone()
            if not exists:
                # a UTF-8 LC_CTYPE makes lower() and regex classes Unicode-aware (the tokenize macro)
                try:
                    con.execute(f"create database {sql_ident(self.dbname)} template template0 encoding 'UTF8'"
                                " lc_collate 'C.UTF-8' lc_ctype 'C.UTF-8'")
                except Exception:  # no C.UTF-8 locale on this system
                    con.execute(f'create database {sql_ident(self.dbname)}')
            con.execute(f"alter database {sql_ident(self.dbname)} set timezone = 'UTC'")
        conn = PgConnection(host=admin.host, port=admin.port, dbname=self.dbname, schema=self.schema)
        with conn.connect(autocommit=True) as con:
            con.execute("create extension if not exists vector")
        migrate(conn)
        return conn

    def stop(self) -> None:
        if self._server is not None:
            if self.keep:
                self._server.cleanup_mode = "stop"  # stop the server, keep the data folder
            self._server.cleanup()
            self._server = None

    def __enter__(self) -> PgConnection:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def default_dir() -> Path:
    """Where ``pg-local`` keeps its data folder when ``--dir`` is not given."""
    return data_dir() / "pg-local"


def _pgdata(folder: Path) -> Path:
    return Path(folder).expanduser().resolve() / "pgdata"


def start_local(folder: Path) -> PgConnection:
    """Start (or find running) the local server in ``folder``; create the database with pgvector
    and migrate the store's schema. Returns the store's connection."""
    return LocalPostgres(_pgdata(folder), _DBNAME, _SCHEMA, keep=True).start()


def local_status(folder: Path) -> PgConnection | None:
    """The store's connection when a server runs in ``folder``, else None (nothing started)."""
    try:
        from pgserver.utils import PostmasterInfo
    except ImportError as exc:
        raise BackendUnavailable("pgserver is not installed: pip install 'agent-memory[postgres-local]'") from exc
    pgdata = _pgdata(folder)
    if not pgdata.is_dir():
        return None
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return None
    host = str(info.socket_dir) if info.socket_dir is not None else "127.0.0.1"
    return PgConnection(host=host, port=int(info.port or 5432), dbname=_DBNAME, schema=_SCHEMA)


def stop_local(folder: Path) -> bool:
    """Stop the server running in ``folder`` (its data stays); False when none was running."""
    if local_status(folder) is None:
        return False
    import pgserver

    pgserver.get_server(_pgdata(folder), cleanup_mode="stop").cleanup()  # the last handle stops it
    return True


def export_lines(conn: PgConnection) -> list[str]:
    """``export`` lines that point the CLI, the servers and dbt at ``conn`` (never a password)."""
    values = {"AGENT_MEMORY_TARGET": "postgres", "AGENT_MEMORY_PG_HOST": conn.host,
              "AGENT_MEMORY_PG_PORT": str(conn.port), "AGENT_MEMORY_PG_USER": conn.user,
              "AGENT_MEMORY_PG_DBNAME": conn.dbname, "AGENT_MEMORY_PG_SCHEMA": conn.schema}
    return [f"export {name}={shlex.quote(value)}" for name, value in values.items()]
