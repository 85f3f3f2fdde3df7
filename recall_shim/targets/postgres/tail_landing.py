"""What the hot tail reads of the messages landing table on PostgreSQL (docs/serving.md, "Hot
tail", "PostgreSQL"), created by migration 8 (migrations.py):

* ``arrived_at timestamptz default now()`` on the messages landing table, with a btree index: the
  server's clock at the writer's transaction start, so the tail worker asks only for rows that
  arrived since its last look (minus ``OVERLAP``: a row becomes visible at its COMMIT, which may
  come after rows of later transactions) instead of anti-joining the whole table every look.
  ``now()`` is a stable default, so adding the column rewrites no row (old rows get the time of
  the migration).
* ``tail_cut`` on ``store_generation`` (generation.py): the newest ``session_log.loaded_at`` of
  the last build that finished both dbt steps (``record_tail_cut``, run by ``PgMemoryStore.build``;
  the migration sets the newest loaded row). A row the first step of a running build loaded is
  past the cut, so it stays in the tail until the memories of that build are served: the tail
  never has a gap during a build.
* ``<schema>.tail_landing(since timestamptz)``: the landing rows that arrived at or after ``since``
  and that ``session_log`` (the warehouse) does not hold as of the cut (an anti-join on the
  indexed ``landing_id``). ``SECURITY DEFINER`` (the owner's rights), so a reader role that may not read
  the landing table itself (roles.py) still recalls with the tail: it gets exactly the rows the
  next build will load into ``session_log``, which it may read once built. EXECUTE is revoked
  from PUBLIC and granted to the reader by ``roles.grant_statements``.

A step's SQL is frozen once released (migrations.py).
"""

from __future__ import annotations

from typing import Any

from recall_shim.common.sql import sql_ident
from recall_shim.targets.postgres.generation import GENERATION_TABLE
from recall_shim.targets.postgres.server import LANDING_TABLES

__all__ = ["create_tail_landing", "record_tail_cut", "TAIL_LANDING_FUNCTION", "TAIL_COLUMNS", "tail_landing_sql"]

TAIL_LANDING_FUNCTION = "tail_landing"
# what the function returns (the landing table's columns the tail reads), in order
TAIL_COLUMNS = ("landing_id", "user_id", "session_id", "agent_id", "msg_seq", "role", "content",
                "content_invalid_utf8", "ts", "message_id", "landed_at", "door_reason", "landing_seq",
                "_landing_file", "arrived_at")


def create_tail_landing(cur: Any, s: str) -> None:
    """Migration step 8 (idempotent)."""
    table = f"{sql_ident(s)}.{sql_ident(LANDING_TABLES['messages'])}"
    if cur.execute("select 1 from information_schema.columns where table_schema = %s and table_name = %s"
                   " and column_name = 'arrived_at'", [s, LANDING_TABLES["messages"]]).fetchone() is None:
        cur.execute(f"alter table {table} add column arrived_at timestamptz default now()")
    cur.execute(f"create index if not exists {sql_ident(LANDING_TABLES['messages'] + '_arrived_at')}"
                f" on {table} (arrived_at)")
    gen = f"{sql_ident(s)}.{sql_ident(GENERATION_TABLE)}"
    if cur.execute("select 1 from information_schema.columns where table_schema = %s and table_name = %s"
                   " and column_name = 'tail_cut'", [s, GENERATION_TABLE]).fetchone() is None:
        cur.execute(f"alter table {gen} add column tail_cut timestamp")
        if cur.execute("select to_regclass(%s)", [f"{sql_ident(s)}.session_log"]).fetchone()[0] is not None:
            record_tail_cut(cur, s)
    cols = ", ".join(f"l.{c}" for c in TAIL_COLUMNS)
    out = ", ".join(f"{c} {'boolean' if c == 'content_invalid_utf8' else 'timestamptz' if c == 'arrived_at' else 'text'}"
                    for c in TAIL_COLUMNS)
    fn = f"{sql_ident(s)}.{TAIL_LANDING_FUNCTION}(since timestamptz)"
    # the body names session_log, which the first build creates: not checked at creation
    cur.execute("set local check_function_bodies = off")
    cur.execute(
        f"create or replace function {fn} returns table ({out}) language sql stable security definer"
        f" set search_path = pg_catalog, pg_temp as $fn$"
        f" select {cols} from {table} as l where l.arrived_at >= since and l.landing_id is not null"
        f" and not exists (select 1 from {sql_ident(s)}.session_log as w where w.landing_id = l.landing_id"
        f" and w.loaded_at <= (select g.tail_cut from {gen} as g where g.id = 1))"
        f" $fn$")
    cur.execute(f"revoke all on function {fn} from public")


def tail_landing_sql(schema: str) -> str:
    """The SELECT of the tail's landing rows since %s (a timestamptz)."""
    return f"select {', '.join(TAIL_COLUMNS)} from {sql_ident(schema)}.{TAIL_LANDING_FUNCTION}(%s)"


def record_tail_cut(cur: Any, schema: str) -> None:
    """Move the cut to the newest row ``session_log`` holds (in the caller's transaction; a no-op
    on a schema before migration 8): the rows loaded so far are served by the live tables."""
    gen = f"{sql_ident(schema)}.{sql_ident(GENERATION_TABLE)}"
    if cur.execute("select 1 from information_schema.columns where table_schema = %s and table_name = %s"
                   " and column_name = 'tail_cut'", [schema, GENERATION_TABLE]).fetchone() is None:
        return
    cur.execute(f"update {gen} set tail_cut = greatest(tail_cut, (select max(loaded_at)"
                f" from {sql_ident(schema)}.session_log)) where id = 1")
