"""The generation of a PostgreSQL store: a counter that every change of the recallable memories
moves, so a process may keep what it read of a user until the counter moves
(recall_shim/targets/postgres/user_cache.py).

``<schema>.store_generation`` (migration 7) holds one row, ``generation`` and ``changed_at``.
It is incremented

* by every dbt run or build on the postgres target (the on-run-end hook ``bump_store_generation``,
  macros/publish.sql; it runs after failed models too), and again by ``PgMemoryStore.build`` when
  its dbt steps end, whatever their outcome;
* by every forget, **inside the forget's transaction**: the deletes and the new generation become
  visible together, so no reader can hold the old generation with the forgotten rows gone
  elsewhere, nor serve a forgotten memory from its cache after the forget's COMMIT.

Readers only SELECT it (the reader role reads every table of the schema: docs/scaling_out.md,
"Roles"). A store migrated before step 7 has no table until the owner's next use migrates it;
until then readers do not cache.
"""

from __future__ import annotations

from typing import Any

from recall_shim.common.sql import sql_ident

__all__ = ["GENERATION_TABLE", "create_generation_table", "bump_generation", "generation_sql"]

GENERATION_TABLE = "store_generation"


def _table(schema: str) -> str:
    return f"{sql_ident(schema)}.{sql_ident(GENERATION_TABLE)}"


def create_generation_table(cur: Any, schema: str) -> None:
    """Migration step: the table and its one row (generation 0)."""
    t = _table(schema)
    cur.execute(f"create table if not exists {t} (id int primary key check (id = 1), generation bigint not null,"
                " changed_at timestamptz not null default now())")
    cur.execute(f"insert into {t} (id, generation) values (1, 0) on conflict (id) do nothing")


def bump_generation(cur: Any, schema: str) -> None:
    """Increment the generation in the caller's transaction (no-op when the table is missing)."""
    if cur.execute("select to_regclass(%s)", [_table(schema)]).fetchone()[0] is None:
        return
    cur.execute(f"update {_table(schema)} set generation = generation + 1, changed_at = now() where id = 1")


def generation_sql(schema: str) -> str:
    """The SELECT of the current generation (one row, one bigint)."""
    return f"select generation from {_table(schema)} where id = 1"
