"""The hot tail on PostgreSQL (docs/serving.md, "Hot tail", "PostgreSQL"): messages landed since
the last build, recallable before the next one, with the build's own rules and ids and the one
recall definition.

* **What the tail is**: the landing rows ``session_log`` does not hold as of the last finished
  build, read through the owner's function ``tail_landing(since)`` (tail_landing.py, migration 8),
  so a reader role recalls with the tail without reading the landing table. Each look asks only
  for rows that arrived since the previous look minus ``OVERLAP`` (a row is visible at its
  COMMIT); a moved store generation (a build step or a forget: generation.py) makes the worker
  start again from every uncovered row.
* **Same rules, same ids**: the build publishes macros/tail.sql's statements in ``recall_queries``
  on PostgreSQL too (``tail_seeds`` ... ``tail_merged``). They run on PostgreSQL in this object's
  own session connection, over temporary tables it fills (``TEMPORARY`` privilege on the
  database, which PostgreSQL grants to PUBLIC by default; a transaction-mode pooler needs a
  session connection for it). The new texts are embedded in one call per batch.
* **One score**: recall of a user with tail memories runs the published ``recall_tail``
  statement (the compiled ``recall_sql`` over the live tables plus the user's tail rows, bound as
  JSONB parameters: macros/tail.sql), never a copy of the score.
* **Who runs it**: a server's worker thread (``start_worker``, every ``WORKER_POLL`` seconds or
  when kicked after a write of this process); without a worker each recall syncs first.
"""

from __future__ import annotations

import json
import threading
import warnings
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable

from recall_shim.common.embedding import embed_texts
from recall_shim.common.sql import sql_ident
from recall_shim.errors import StoreNotBuilt
from recall_shim.targets.postgres.generation import generation_sql
from recall_shim.targets.postgres.server import PgConnection
from recall_shim.serving.tail_worker import TailWorker
from recall_shim.targets.postgres.tail_landing import TAIL_COLUMNS, tail_landing_sql

__all__ = ["PgTail", "PgTailState", "OVERLAP", "TAIL_WAIT_SECONDS"]

OVERLAP = timedelta(seconds=30)  # a row committed this long after its transaction began is still seen
TAIL_WAIT_SECONDS = 1.0  # a recall waits this long for the worker after a build or forget
STATEMENTS = ("tail_seeds", "tail_rows", "tail_extractions", "tail_memories", "tail_terms", "tail_merged",
              "recall_tail")

_T = "text"
_TS = "timestamp"
MESSAGES = (("landing_id", _T), ("user_id", _T), ("session_id", _T), ("agent_id", _T), ("msg_seq", _T),
            ("role", _T), ("content", _T), ("ts", _T), ("message_id", _T), ("landed_at", _T), ("door_reason", _T),
            ("is_invalid_utf8", "boolean"), ("landing_seq", "bigint"), ("landing_file", _T), ("loaded_at", _TS))
ROWS = (("landing_id", _T), ("user_id", _T), ("session_id", _T), ("agent_id", _T), ("msg_seq", "bigint"),
        ("role", _T), ("content", _T),
        ("message_at", _TS), ("message_id", _T), ("landed_at", _TS), ("landing_file", _T), ("landing_seq", "bigint"))
EXTRACTIONS = (("message_id", _T), ("user_id", _T), ("kind", _T), ("slot", _T), ("content", _T),
               ("happened_on", "date"), ("happened_grain", _T), ("message_at", _TS), ("loaded_at", _TS))


@dataclass(frozen=True)
class PgTailState:
    """What the tail holds, made against one store generation: per user the JSONB texts of its
    visible tail memories and their term rows (the ``recall_tail`` statement's $9 and $10)."""

    generation: int | None = None
    users: dict[str, tuple[str, str]] = field(default_factory=dict)


def _jsonable(v: Any) -> Any:
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    return v


def _dicts(cur: Any) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


class PgTail(TailWorker[PgTailState]):
    """The tail of one PostgreSQL store, kept by one reader (thread-safe)."""

    def __init__(self, conn: PgConnection) -> None:
        super().__init__(PgTailState(), "pg-hot-tail", "the live tables")
        self.conn = conn
        self._lock = threading.Lock()
        self._con: Any = None  # the tail's own session connection (temporary tables)
        self._emb: dict[tuple[str, str], str] = {}  # (form, content) -> vector text, embedded once
        self._term_cache: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._generation: int | None = None
        self._statements: dict[str, str] | None = None
        self._model, self._dim = "", 0
        self._clear()

    def _clear(self) -> None:
        self._since: datetime | None = None  # the server's time of the last look
        self._seen: set[str] = set()  # landing ids read
        self._rows: dict[str, list[dict[str, Any]]] = {}
        self._extractions: dict[str, list[dict[str, Any]]] = {}
        self._users: dict[str, tuple[str, str]] = {}

    def current(self, generation: int | None, wait: float = 0.0) -> PgTailState | None:
        """The state made against ``generation``, or None (the live tables alone answer). With a
        healthy worker running, waits up to ``wait`` seconds for it."""
        return self._wait_for(lambda s: generation is not None and s.generation == generation, wait)

    def reset(self) -> None:
        """Forget everything read (the next sync starts again)."""
        with self._lock:
            self._clear()
            self._generation = None
            self._drop_session()
            self._publish(PgTailState())

    def _drop_session(self) -> None:
        if self._con is not None:
            try:
                self._con.close()
            except Exception:  # noqa: BLE001 - a broken connection is dropped either way
                pass
        self._con = None

    # --- keeping up --------------------------------------------------------------------------
    def _session(self) -> Any:
        if self._con is None or self._con.closed:
            self._con = self.conn.connect(autocommit=True)
            self._generation = None  # its temporary tables are gone: load again
        return self._con

    def sync(self) -> None:
        """Read what arrived since the last look, make its memories, publish the new state.
        Raises StoreNotBuilt before the first build."""
        with self._lock:
            con = self._session()
            row = con.execute(generation_sql(self.conn.schema)).fetchone()
            generation = None if row is None else int(row[0])
            if generation != self._generation or self._statements is None:
                self._load(con)
                self._generation = generation
            if self._statements is None:
                self._users = {}
            else:
                touched = self._read_new(con)
                if touched:
                    self._make(con, touched)
            state = self._state
            if (state.generation, state.users) != (self._generation, self._users):
                self._publish(PgTailState(self._generation, dict(self._users)))

    def _load(self, con: Any) -> None:
        """The build's statements (again after every build or forget) and a fresh start."""
        import psycopg

        self._clear()
        s = sql_ident(self.conn.schema)
        try:
            rows = dict(con.execute(f"select query_name, sql_text from {s}.recall_queries"
                                    " where query_name = any(%s)", [list(STATEMENTS)]).fetchall())
            settings = con.execute(f"select embedding_model, embedding_dim from {s}.recall_queries"
                                   " where query_name = 'recall'").fetchone()
        except psycopg.errors.UndefinedTable:
            raise StoreNotBuilt(f"schema {self.conn.schema} has no recall_queries: build first") from None
        self._statements = rows if set(STATEMENTS) <= set(rows) and settings else None
        if settings:
            self._model, self._dim = str(settings[0]), int(settings[1])
        if self._statements is not None:
            con.execute(self._statements["tail_seeds"])  # the rules' seed tables of this session

    def _temp(self, con: Any, name: str, columns: tuple[tuple[str, str], ...], rows: list[dict[str, Any]]) -> None:
        """Temporary table ``name`` of this session holding ``rows`` (bound as one JSONB value)."""
        cols = ", ".join(f"{c} {t}" for c, t in columns)
        con.execute(f"drop table if exists pg_temp.{name}")
        con.execute(f"create temporary table {name} as select * from jsonb_to_recordset(%s::jsonb) as t ({cols})",
                    [json.dumps([{c: _jsonable(r.get(c)) for c, _ in columns} for r in rows])])

    def _read_new(self, con: Any) -> set[str]:
        """The new landing rows: typed and checked (tail_rows), extracted once (tail_extractions)."""
        assert self._statements is not None
        looked_at = con.execute("select now()").fetchone()[0]
        since = self._since - OVERLAP if self._since is not None else datetime(1, 1, 1, tzinfo=timezone.utc)
        raw = [dict(zip(TAIL_COLUMNS, r)) for r in con.execute(tail_landing_sql(self.conn.schema), [since]).fetchall()]
        self._since = looked_at
        raw = [r for r in raw if r["landing_id"] not in self._seen and r["user_id"] is not None]
        if not raw:
            return set()
        self._seen.update(r["landing_id"] for r in raw)
        for r in raw:
            r["is_invalid_utf8"] = bool(r.pop("content_invalid_utf8") or False)
            try:
                r["landing_seq"] = int(r["landing_seq"] or 0)
            except (TypeError, ValueError):
                r["landing_seq"] = 0
            r["landing_file"] = r.pop("_landing_file")
            r["loaded_at"] = None
        self._temp(con, "tail_messages", MESSAGES, raw)
        rows = _dicts(con.execute(self._statements["tail_rows"]))
        self._temp(con, "tail_new_rows", ROWS, rows)
        for e in _dicts(con.execute(self._statements["tail_extractions"])):
            self._extractions.setdefault(e["user_id"], []).append(e)
        for r in rows:
            self._rows.setdefault(r["user_id"], []).append(r)
        return {r["user_id"] for r in rows}

    def _make(self, con: Any, users: set[str]) -> None:
        """(Re)make the tail memories of ``users`` from all their rows: memories (tail_memories),
        vectors, term rows (tail_terms), and which the build folds into another (tail_merged)."""
        import psycopg

        assert self._statements is not None
        self._temp(con, "tail_rows", ROWS, [r for u in users for r in self._rows.get(u, [])])
        self._temp(con, "tail_extractions", EXTRACTIONS, [e for u in users for e in self._extractions.get(u, [])])
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        with psycopg.RawCursor(con) as cur:
            made = _dicts(cur.execute(self._statements["tail_memories"], [now]))
        self._embed(made)
        new = [m for m in made if (m["memory_id"], m["content"]) not in self._term_cache]
        if new:  # term rows depend on the content alone: each memory's are made once
            self._temp(con, "tail_memory_rows", (("memory_id", _T), ("user_id", _T), ("content", _T)), new)
            by_id = {m["memory_id"]: m["content"] for m in new}
            for m in new:
                self._term_cache[(m["memory_id"], m["content"])] = []
            for t in _dicts(con.execute(self._statements["tail_terms"])):
                self._term_cache[(t["memory_id"], by_id[t["memory_id"]])].append(t)
        hidden = self._merged(con, made)
        for u in users:
            mems = [m for m in made if m["user_id"] == u and m["memory_id"] not in hidden]
            if not mems:
                self._users.pop(u, None)
                continue
            terms = [t for m in mems for t in self._term_cache[(m["memory_id"], m["content"])]]
            # every column tail_memories returned (plus the embedding): recall_tail reads those
            # macros/tail.sql's tail_memory_columns lists, so the list is written once, there
            self._users[u] = (json.dumps([{c: _jsonable(v) for c, v in m.items()} for m in mems]),
                              json.dumps([{k: t[k] for k in ("memory_id", "user_id", "term", "tf", "doc_len")}
                                          for t in terms]))

    def _merged(self, con: Any, made: list[dict[str, Any]]) -> set[str]:
        """memory_ids the build folds into another memory (published tail_merged, against the live
        memories of the same users and earlier tail candidates)."""
        assert self._statements is not None
        dim = int(self._dim)
        self._temp(con, "tail_candidates_rows", (("memory_id", _T), ("user_id", _T), ("kind", _T), ("slot", _T),
                                                 ("created_at", _TS), ("embedding", _T)), made)
        con.execute("drop view if exists pg_temp.tail_prior_memories")
        con.execute("drop table if exists pg_temp.tail_candidates")
        con.execute(f"create temporary table tail_candidates as select memory_id, user_id, kind, slot, created_at,"
                    f" embedding::vector({dim}) as embedding from tail_candidates_rows")
        con.execute(f"create temporary view tail_prior_memories as select user_id, kind, slot,"
                    f" embedding::vector({dim}) as embedding from {sql_ident(self.conn.schema)}.long_term_memory"
                    f" where user_id in (select user_id from tail_candidates)")
        return {r[0] for r in con.execute(self._statements["tail_merged"]).fetchall()}

    def _embed(self, memories: list[dict[str, Any]]) -> None:
        """Each memory's vector (pgvector text): the store's model, the form the build embeds its kind in."""
        by_form: dict[str, list[str]] = {}
        for m in memories:
            if (m["embedding_form"], m["content"]) not in self._emb:
                by_form.setdefault(m["embedding_form"], []).append(m["content"])
        for form, texts in by_form.items():
            texts = sorted(set(texts))
            for text, vec in zip(texts, embed_texts(self._model, form, texts)):
                self._emb[(form, text)] = "[" + ",".join(repr(float(x)) for x in vec) + "]"
        for m in memories:
            m["embedding"] = self._emb[(m["embedding_form"], m["content"])]

    # --- answering -----------------------------------------------------------------------------
    @property
    def synced_generation(self) -> int | None:
        """The store generation of the last sync (None before one)."""
        return self._generation

    def recall(self, read: Callable[[Callable[[Any], Any]], Any], execute: Callable[[str, list[Any]], Any],
               user_id: str, params: list[Any]) -> list[tuple[Any, ...]] | None:
        """The published ``recall_tail`` statement (``params``: the recall statement's $1..$8) over
        the live tables and the user's tail, when the user has tail memories; else None (the
        caller's paths answer). Without a worker the tail is synced first; with one, the state
        of the store's current generation answers (``read`` runs on the recall connection),
        waiting up to TAIL_WAIT_SECONDS for the worker after a build or forget. A tail that fails
        warns and answers None."""
        import psycopg

        try:
            if self.running:
                generation = read(lambda con: con.execute(generation_sql(self.conn.schema)).fetchone())
                generation = None if generation is None else int(generation[0])
            else:
                self.sync()
                generation = self._generation
            state = self.current(generation, wait=TAIL_WAIT_SECONDS)
            statements = self._statements
            if state is None or user_id not in state.users or statements is None:
                return None
            memories, terms = state.users[user_id]
            return list(execute(statements["recall_tail"], [*params, memories, terms, state.generation]))
        except (psycopg.Error, StoreNotBuilt) as exc:
            warnings.warn(f"the hot tail did not answer (recall served from the live tables only): {exc}",
                          RuntimeWarning, stacklevel=4)
            self.reset()
            return None

    def unbuilt_memory(self, memory_id: str) -> tuple[str, list[str]] | None:
        """(owner, source message ids) of a visible tail memory, else None."""
        with self._lock:
            for user, (mems, _) in self._users.items():
                for m in json.loads(mems):
                    if m["memory_id"] == memory_id:
                        return user, list(m["source_message_ids"] or [])
        return None

    def close(self) -> None:
        self._stop_worker()
        with self._lock:
            self._drop_session()
            self._clear()
            self._generation = None
            self._publish(PgTailState())
