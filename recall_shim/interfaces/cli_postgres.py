"""The PostgreSQL operator's commands of ``agent-memory`` (docs/scaling_out.md): ``migrate``
(apply the shim's schema migrations, as the store's owner) and ``grants`` (print or apply the
GRANT statements of the writer and reader roles). Thin layers over
recall_shim/targets/postgres/migrations.py and roles.py."""

from __future__ import annotations

import argparse
import json
from typing import Any

from recall_shim.errors import InvalidInput
from recall_shim.targets import selected_target
from recall_shim.targets.postgres.migrations import LATEST_VERSION, migrate
from recall_shim.targets.postgres.roles import apply_grants, grant_statements
from recall_shim.targets.postgres.server import PgConnection

__all__ = ["add_postgres_commands"]


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


def add_postgres_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``migrate`` and ``grants`` to the CLI's subparsers."""
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
