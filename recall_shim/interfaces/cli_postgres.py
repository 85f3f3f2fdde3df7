"""The PostgreSQL operator's commands of ``agent-memory`` (docs/scaling_out.md): ``migrate``
(apply the shim's schema migrations, as the store's owner), ``grants`` (print or apply the
GRANT statements of the writer and reader roles) and ``pg-local`` (start, stop or ask about the
bundled local server). Thin layers over recall_shim/targets/postgres/migrations.py, roles.py and
local_server.py. :data:`POSTGRES_HELP` says what each general command means on ``--target
postgres``; :func:`add_postgres_commands` appends it to their descriptions."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from recall_shim.errors import InvalidInput
from recall_shim.targets import selected_target
from recall_shim.targets.postgres.local_server import default_dir, export_lines, local_status, start_local, stop_local
from recall_shim.targets.postgres.migrations import LATEST_VERSION, migrate
from recall_shim.targets.postgres.roles import apply_grants, grant_statements
from recall_shim.targets.postgres.server import PgConnection

__all__ = ["add_postgres_commands", "POSTGRES_HELP", "DB_HELP"]

#: what --db means: appended to the flag's help by the CLI
DB_HELP = "; not used on --target postgres (the store is the AGENT_MEMORY_PG_* connection and schema)"

#: what each general command means on --target postgres, appended to its description
POSTGRES_HELP = {
    "ingest": "the rows are INSERTed into <schema>.session_log_landing in one transaction (writer role).",
    "remember": "the message is INSERTed into <schema>.session_log_landing (writer role).",
    "build": "runs `dbt build --target postgres` in two steps around the embedding and rebuilds the schema's "
             "tables in place; there are no snapshot files (recall reads the live tables). Owner role; waits for "
             "a running build or forget on the schema's lock row (AGENT_MEMORY_PG_LOCK_WAIT seconds, then "
             "StoreBusy).",
    "recall": "reads the live tables (MVCC: one consistent state while a build runs); reader role.",
    "forget": "deletes in one transaction from every table of the schema (landing tables included), records "
              "the audit in <schema>.forget_audit, then runs plain VACUUM on the touched tables (no exclusive "
              "lock); old bytes remain in free space, WAL and backups until reused or expired "
              "(docs/data_protection.md). Owner role; waits for a running build.",
    "similarity": "reads the live tables; reader role.",
    "demo": "ingests into and builds the schema named by AGENT_MEMORY_PG_*.",
    "report": "not available (it reads a DuckDB file).",
    "serve": "the server opens the PostgreSQL store; reads use the live tables (no snapshots), so it never "
             "blocks a build either.",
    "mcp": "the tools work on the PostgreSQL store named by AGENT_MEMORY_PG_*.",
}


def _postgres(command: str, db: str | None) -> PgConnection:
    if db is not None:
        raise InvalidInput("--db names a DuckDB file; the postgres target is named by the AGENT_MEMORY_PG_* "
                           "variables (docs/scaling_out.md)")
    if selected_target() != "postgres":
        raise InvalidInput(f"{command} applies to the postgres target: agent-memory --target postgres {command} ..."
                           " (docs/scaling_out.md)")
    return PgConnection.from_env()


def cmd_migrate(args: argparse.Namespace) -> int:
    report = migrate(_postgres("migrate", args.db))
    if args.json:
        print(json.dumps(report.as_dict()))
        return 0
    if not report.applied:
        print(f"schema {report.schema} is up to date (migration {report.version} of {LATEST_VERSION})")
        return 0
    steps = "; ".join(f"{v}: {name}" for v, name in report.applied)
    print(f"schema {report.schema}: applied {len(report.applied)} migrations ({steps}); now at {report.version}")
    return 0


def cmd_grants(args: argparse.Namespace) -> int:
    conn = _postgres("grants", args.db)
    if args.apply:
        statements = apply_grants(conn, writer=args.writer, reader=args.reader,
                                  reader_records_access=not args.reader_no_access)
        print(f"applied {len(statements)} statements to schema {conn.schema} as {conn.user}")
        return 0
    for sql in grant_statements(conn.schema, owner=args.owner or conn.user, writer=args.writer, reader=args.reader,
                                reader_records_access=not args.reader_no_access):
        print(sql + ";")
    return 0


def cmd_pg_local(args: argparse.Namespace) -> int:
    if args.db is not None:
        raise InvalidInput("--db names a DuckDB file; pg-local takes --dir")
    folder = Path(args.dir) if args.dir else default_dir()
    if args.action == "start":
        conn = start_local(folder)
        print(f"# PostgreSQL + pgvector runs in {folder} (Unix socket, no password); for this shell:")
    elif args.action == "status":
        found = local_status(folder)
        if found is None:
            print(f"no local PostgreSQL runs in {folder}")
            return 1
        conn = found
        print(f"# PostgreSQL + pgvector runs in {folder}:")
    else:
        stopped = stop_local(folder)
        print(f"stopped the local PostgreSQL in {folder} (data kept)" if stopped
              else f"no local PostgreSQL runs in {folder}")
        return 0
    for line in export_lines(conn):
        print(line)
    return 0


def add_postgres_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``migrate``, ``grants`` and ``pg-local`` to the CLI's subparsers, and what the other
    commands mean on --target postgres to their descriptions."""
    for name, parser in sub.choices.items():
        if name in POSTGRES_HELP:
            parser.description = f"{parser.description} On --target postgres: {POSTGRES_HELP[name]}"
    s = sub.add_parser("migrate", parents=[common], help="apply the shim's schema migrations (postgres, as the owner)",
                       description="PostgreSQL target only: create or upgrade what the shim owns in the store's "
                                   "schema (the schema, the landing tables, ingested_files, forget_audit, later "
                                   "columns) in one transaction, recorded in <schema>.shim_migrations; a no-op when "
                                   "up to date. Run it as the store's owner: writer and reader roles never run DDL "
                                   "and are refused a store that is behind (docs/scaling_out.md).")
    s.add_argument("--json", action="store_true", help="print the migration report as JSON")
    s.set_defaults(func=cmd_migrate)

    s = sub.add_parser("grants", parents=[common], help="print or apply the writer and reader roles' GRANTs (postgres)",
                       description="PostgreSQL target only: the GRANT statements that let a writer role remember "
                                   "and ingest (INSERT into the landing tables) and a reader role recall (SELECT on "
                                   "the built tables, INSERT of its access events), without DDL. Printed as SQL, or "
                                   "run as the owner with --apply. The roles must exist (create role ... login "
                                   "password ...). Run again after a migration (docs/scaling_out.md, Roles).")
    s.add_argument("--writer", default=None, metavar="ROLE", help="the role that remembers and ingests")
    s.add_argument("--reader", default=None, metavar="ROLE", help="the role that recalls")
    s.add_argument("--owner", default=None, metavar="ROLE",
                   help="the role that migrates and builds, for the default privileges (default: "
                        "AGENT_MEMORY_PG_USER; --apply always uses the connected role)")
    s.add_argument("--reader-no-access", action="store_true",
                   help="do not let the reader record access events (its recalls then warn AccessNotRecorded "
                        "and do not reinforce strength)")
    s.add_argument("--apply", action="store_true", help="run the statements as the connected role (the owner)")
    s.set_defaults(func=cmd_grants)

    s = sub.add_parser("pg-local", parents=[common], help="start, stop or show a local PostgreSQL + pgvector to try",
                       description="A one-command local trial of the postgres target: start the PostgreSQL 16 + "
                                   "pgvector server bundled in the pgserver wheel (extra postgres-local) in the "
                                   "background, create the database and migrate the store's schema, and print the "
                                   "AGENT_MEMORY_* lines to export; status prints them again; stop stops the server "
                                   "and keeps its data. It listens on a Unix socket in --dir only (no TCP, no "
                                   "password). Not a deployment (docs/scaling_out.md).")
    s.add_argument("action", choices=["start", "stop", "status"], help="start, stop or status")
    s.add_argument("--dir", default=None, metavar="PATH",
                   help="the server's folder (default: pg-local in the data folder)")
    s.set_defaults(func=cmd_pg_local)
