"""The hot tail's spec path: the snapshot's compiled recall statement over the snapshot's rows plus
the tail's, for what the index does not serve (agent/session-scoped recall, the rrf, lexical and
vector fusions, a snapshot without an index).

Temporary views on a cursor of the recall reader's snapshot connection put the tail beside the
snapshot's tables under their names (the compiled statement names them unqualified):
``long_term_memory``, ``memory_term_index`` and ``memory_term_stats``, whose statistics for the
tail's users are recomputed over both with the build's macro (published ``tail_term_stats``).
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

import duckdb
import pyarrow as pa

from recall_shim.common.sql import sql_ident
from recall_shim.serving.reader import RecalledMemory, SnapshotReader, run_compiled
from recall_shim.serving.tail_files import MEMORY_COLUMNS, MEMORY_SCHEMA, TERM_SCHEMA
from recall_shim.serving.tail_search import UserTail

_LATE_COLUMNS = {"turn_session_id": "varchar", "turn_seq": "bigint"}  # long_term_memory's columns added later

__all__ = ["CompiledTail"]


class CompiledTail:
    """The cursor and views of one recall reader (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._con: Any = None  # the snapshot connection the cursor was made on
        self._cursor: duckdb.DuckDBPyConnection | None = None
        self._registered: object = None  # the tail state whose rows the cursor's tables hold
        self._relations = ("", "")

    def recall(self, reader: SnapshotReader, users: dict[str, UserTail], state: object, stats_sql: str, dim: int,
               user_id: str, vectors: Sequence[Sequence[float]], top_k: int, min_sim: float,
               kinds: Sequence[str] | None, texts: Sequence[str | None] | None, agent_id: str | None,
               session_id: str | None) -> list[list[RecalledMemory]]:
        """The compiled statement over the snapshot and the tail ``users`` (of tail state ``state``)."""
        with self._lock:
            cursor = self._views(reader, dim)
            if self._registered is not state:
                self._register(cursor, users, stats_sql, dim)
                self._registered = state
            return run_compiled(cursor, reader.settings.sql_text, user_id, vectors, top_k, min_sim, kinds, texts,
                                agent_id, session_id)

    def _views(self, reader: SnapshotReader, dim: int) -> duckdb.DuckDBPyConnection:
        con = reader.connection()
        if self._con is con and self._cursor is not None:
            return self._cursor
        cur = con.cursor()
        name = str(con.execute("select current_database()").fetchone()[0])
        snap = sql_ident(name)
        ltm, terms, stats = (f"{snap}.main.{t}" for t in ("long_term_memory", "memory_term_index", "memory_term_stats"))
        # a snapshot published before a column existed (the turn columns) reads it as NULL: its
        # recall statement does not use it either
        held = {r[0] for r in cur.execute("select column_name from information_schema.columns where table_catalog = ?"
                                          " and table_schema = 'main' and table_name = 'long_term_memory'",
                                          [name]).fetchall()}
        cols = ", ".join(f"null::{_LATE_COLUMNS[c]} as {c}" if c in _LATE_COLUMNS and c not in held else c
                         for c in MEMORY_COLUMNS)
        self._relations = (ltm, terms)
        self._register(cur, {}, None, dim)
        for view in (
            # the tail's visible memories and term rows are tables of this cursor (_register); the
            # snapshot's rows of a memory_id are never among them (hidden when the tail was made)
            f"long_term_memory as select {cols} from {ltm} union all by name select {', '.join(MEMORY_COLUMNS)}"
            " from tail_mem",
            f"memory_term_index as select memory_id, user_id, term, tf, doc_len from {terms}"
            " union all select memory_id, user_id, term, tf, doc_len from tail_term",
            f"memory_term_stats as select user_id, term, df, n_docs, avg_doc_len from {stats}"
            " where user_id not in (select user_id from tail_mem)"
            " union all select user_id, term, df, n_docs, avg_doc_len from tail_stat",
        ):
            cur.execute("create or replace temp view " + view)
        self._cursor, self._con, self._registered = cur, con, None
        return cur

    def _register(self, cur: duckdb.DuckDBPyConnection, users: dict[str, UserTail], stats_sql: str | None,
                  dim: int) -> None:
        """The visible tail memories, their term rows and their users' term statistics (over the
        snapshot's rows and the tail's: published tail_term_stats) as tables of the cursor."""
        mems = [r for t in users.values() for r in t.rows]
        terms = [r for t in users.values() for r in t.term_rows]
        cur.register("tail_memory_arrow", pa.Table.from_pylist(mems, schema=MEMORY_SCHEMA))
        cur.register("tail_terms_arrow", pa.Table.from_pylist(terms, schema=TERM_SCHEMA))
        ltm, index = self._relations
        emb = f"embedding::float[{int(dim)}] as embedding"
        cur.execute("create or replace temp table tail_mem as select "
                    + ", ".join(MEMORY_COLUMNS).replace("embedding", emb, 1) + " from tail_memory_arrow")
        cur.execute("create or replace temp table tail_term as select * from tail_terms_arrow")
        cur.execute(f"""create or replace temp view tail_term_rows as
            select memory_id, user_id, term, doc_len from {index} where user_id in (select user_id from tail_mem)
            union all select memory_id, user_id, term, doc_len from tail_term""")
        if stats_sql is None:
            cur.execute("create or replace temp table tail_stat (user_id varchar, term varchar, df bigint,"
                        " n_docs bigint, avg_doc_len double)")
        else:
            cur.execute(f"create or replace temp table tail_stat as {stats_sql}")

    def close(self) -> None:
        with self._lock:
            self._cursor = None
            self._con = None
            self._registered = None
