"""The hot tail: messages landed since the newest snapshot, recallable before the next build
(docs/serving.md "Hot tail").

A build records which landing files its snapshot covers (``record_covered``: the message files
listed before dbt started, all of which the build loads). ``HotTail.sync`` lists the messages
folder when it changed, reads the files the record does not cover, and makes their memories with
the statements the build published in ``recall_queries`` (macros/tail.sql: the build's own
typing, checks, episode extraction, memory ids, strength fold, term rows and statistics), in one
statement run per batch of new rows, embedding each new text once with the store's model. It
works on its own in-memory DuckDB and its own read-only connection of the snapshot (never the
recall path's), and publishes an immutable ``TailState``: per user a ``UserTail`` of the visible
tail memories (recall_shim/serving/tail_search.py). A tail memory whose memory_id the snapshot
holds, or that the build folds into another memory, is not visible (the snapshot's row answers).
Forget tombstones drop the forgotten rows; a new tombstone rebuilds the tail.

Who runs ``sync``: a long-lived server starts a worker thread (``start_worker``) that syncs
every WORKER_POLL seconds or when kicked; recall only reads the current state and never waits for
the worker, except after a new snapshot or tombstone (then up to ``wait`` seconds, else the
snapshot alone answers). Without a worker (the library, a one-shot CLI) the recall syncs first.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import duckdb
import numpy as np
import pyarrow as pa

from recall_shim.common.embedding import embed_texts
from recall_shim.common.paths import StorePaths
from recall_shim.common.sql import sql_ident
from recall_shim.forget.journal import pending_forget
from recall_shim.serving.reader import RecalledMemory, SnapshotReader
from recall_shim.serving.tail_compiled import CompiledTail
from recall_shim.serving.tail_files import (CANDIDATE_SCHEMA, COVERED_RECORD, EXTRACTION_SCHEMA, LANDED_SCHEMA,
                                            LINK_SCHEMA, MEMORY_COLUMNS, ROW_SCHEMA, TERM_SCHEMA, Tombstones, covered_files, dicts,
                                            jsonl_names, landed_message_files, landed_row, read_jsonl, file_stamp)
from recall_shim.serving.tail_search import TailState, UserTail
from recall_shim.serving.tail_worker import TailWorker

__all__ = ["HotTail"]

RELOOK_NS = 2_000_000_000
STATEMENTS = ("tail_seeds", "tail_rows", "tail_extractions", "tail_memories", "tail_terms", "tail_term_stats",
              "tail_merged")


class HotTail(TailWorker[TailState]):
    """The tail of one store, kept by one reader (thread-safe)."""

    def __init__(self, paths: StorePaths) -> None:
        super().__init__(TailState(), "hot-tail", "the snapshot")
        self.paths = paths
        self._lock = threading.Lock()  # the sync's own state below
        # runs the published tail statements; one thread: a batch is a few chunks, and the rule
        # extraction's constant patterns are compiled once per thread (docs/serving.md)
        self._con = duckdb.connect(config={"threads": 1})
        self._reader = SnapshotReader(paths, with_index=False)  # the tail's own snapshot connection
        self._emb: dict[tuple[str, str], list[float]] = {}  # (form, content) -> vector, embedded once
        self._clear()
        self._snapshot: Path | None = None
        self._statements: dict[str, str] | None = None
        self._links_sql: str | None = None
        self._model = ""
        self._dim = 0
        self._check: tuple[Any, duckdb.DuckDBPyConnection] | None = None  # (connection, its cursor with views)
        self._compiled = CompiledTail()

    def _clear(self) -> None:
        self._rows: dict[str, list[dict[str, Any]]] = {}  # user -> accepted rows of uncovered files
        self._extractions: dict[str, list[dict[str, Any]]] = {}  # user -> their extractions (with landing_file)
        self._files: set[str] = set()  # files read (uncovered when read)
        self._memories: dict[str, list[dict[str, Any]]] = {}  # user -> tail memory rows
        self._terms: dict[str, list[dict[str, Any]]] = {}  # user -> their term rows
        self._hidden: dict[str, set[str]] = {}  # user -> tail memory ids the snapshot holds or folds in
        self._users: dict[str, UserTail] = {}  # user -> visible tail memories (published)
        self._term_cache: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (memory_id, content) -> term rows
        self._stamps: dict[str, Any] = {}  # key -> (stat stamp, when looked at)
        self._tombstone_names: list[str] = []
        self._covered: frozenset[str] = frozenset()
        self._tombstones = Tombstones()

    def reset(self) -> None:
        """Forget everything read (e.g. after a forget in this process) and let go of the snapshot
        connection (a purged snapshot's file is not held open); the next sync re-reads. Until
        then no tail is served."""
        with self._lock:
            self._clear()
            self._check = None
            self._reader.close()
            self._snapshot = None
            self._publish(TailState())

    def current(self, snapshot: Path | None, wait: float = 0.0) -> TailState | None:
        """The state made against ``snapshot`` with every tombstone seen, or None (the snapshot
        alone answers). With a healthy worker running, waits up to ``wait`` seconds for it."""
        return self._wait_for(
            lambda s: s.snapshot == snapshot and s.forget_stamp == file_stamp(self.paths.forget), wait)

    # --- keeping up --------------------------------------------------------------------------
    def sync(self) -> None:
        """Read what landed since the last look, make its memories and publish the new state
        (cheap when nothing changed: a few stats). Raises StoreNotBuilt without a snapshot."""
        with self._lock:
            self._reader.refresh()
            con = self._reader.connection()
            forget_stamp = file_stamp(self.paths.forget)
            if self._reader.snapshot_path != self._snapshot:
                self._snapshot = self._reader.snapshot_path
                self._load_statements(con)
                self._hidden = {}  # re-checked against the new snapshot below
                self._stamps.pop("covered", None)
                self._stamps.pop("messages", None)
            if self._statements is None:  # a snapshot published without the tail's statements
                self._users = {}
            else:
                touched: set[str] = set()
                if self._looked_at("forget", self.paths.forget):
                    names = jsonl_names(self.paths.forget)
                    if names != self._tombstone_names:  # a forget: start again from the rewritten files
                        stamps = self._stamps
                        self._clear()
                        self._stamps = {"forget": stamps["forget"]}
                        self._tombstone_names = names
                        self._tombstones.read(self.paths.forget, names)
                if self._looked_at("covered", self.paths.serving / COVERED_RECORD):
                    touched |= self._apply_covered()
                if self._looked_at("messages", self.paths.messages):
                    touched |= self._read_new_files()
                touched |= {u for u in self._memories if u not in self._hidden}
                touched |= set(self._users) - set(self._memories)
                if touched:
                    self._make_memories(touched)
                    self._check_snapshot(touched)
                    self._make_user_tails(touched)
            state = self._state
            if (state.snapshot, state.forget_stamp, state.users) != (self._snapshot, forget_stamp, self._users):
                self._publish(TailState(self._snapshot, forget_stamp, dict(self._users), self._dim,
                                        (self._statements or {}).get("tail_term_stats")))

    def _looked_at(self, key: str, path: Path) -> bool:
        """Whether ``path`` may have changed since it was last looked at under ``key`` (and note
        this look). A folder's mtime has the kernel's coarse clock, so a folder modified within
        RELOOK_NS of the last look is looked at again."""
        stamp, now = file_stamp(path), time.time_ns()
        prev = self._stamps.get(key)
        if prev is not None and prev[0] == stamp and (stamp is None or prev[1] - stamp[0] > RELOOK_NS):
            return False
        self._stamps[key] = (stamp, now)
        return True

    def _load_statements(self, con: duckdb.DuckDBPyConnection) -> None:
        rows = dict(con.execute("select query_name, sql_text from recall_queries"
                                " where list_contains(?::varchar[], query_name)",
                                [[*STATEMENTS, "turn_links"]]).fetchall())
        settings = con.execute("select embedding_model, embedding_dim from recall_queries"
                               " where query_name = 'recall'").fetchone()
        self._statements = rows if set(STATEMENTS) <= set(rows) and settings else None
        self._links_sql = rows.get("turn_links")  # a snapshot without the turn context: none
        try:  # the conversation lift's turns; None when it is off (or the snapshot is older than it)
            lift = con.execute("select lift_numpy, conversation_lift_turns from recall_queries"
                               " where query_name = 'recall'").fetchone()
        except duckdb.BinderException:
            lift = None
        self._lift_turns = int(lift[1]) if lift and (lift[0] or "").strip() else None
        if self._statements is not None:
            self._con.execute(self._statements["tail_seeds"])  # the rules' seed tables, once per snapshot
        if settings:
            self._model, self._dim = str(settings[0]), int(settings[1])
        self._check = None

    def _apply_covered(self) -> set[str]:
        """Drop the rows of files the newest build loaded; returns the users whose rows changed."""
        covered = covered_files(self.paths, self._snapshot)
        self._covered = covered
        gone = self._files & covered
        if not gone:
            return set()
        self._files -= gone
        touched = set()
        for user, rows in list(self._rows.items()):
            kept = [r for r in rows if r["landing_file"] not in gone]
            if len(kept) != len(rows):
                touched.add(user)
                self._rows[user] = kept
                self._extractions[user] = [e for e in self._extractions.get(user, []) if e["landing_file"] not in gone]
        return touched

    def _read_new_files(self) -> set[str]:
        """Read the landed files not read yet: their accepted rows, extracted once (published
        statements tail_rows and tail_extractions); returns the users they belong to."""
        assert self._statements is not None
        raw = []
        for name in landed_message_files(self.paths):
            if name in self._files or name in self._covered:
                continue
            self._files.add(name)
            raw += [row for row in (landed_row(rec, name) for rec in read_jsonl(self.paths.messages / name))
                    if row["user_id"] is not None and not self._tombstones.forgets(row)]
        if not raw:
            return set()
        self._con.register("tail_messages", pa.Table.from_pylist(raw, schema=LANDED_SCHEMA))
        rows = dicts(self._con.execute(self._statements["tail_rows"]))
        self._con.register("tail_new_rows", pa.Table.from_pylist(rows, schema=ROW_SCHEMA))
        files = {(r["user_id"], r["message_id"], r["landed_at"]): r["landing_file"] for r in rows}
        for e in dicts(self._con.execute(self._statements["tail_extractions"])):
            e["landing_file"] = files.get((e["user_id"], e["message_id"], e["loaded_at"]))
            self._extractions.setdefault(e["user_id"], []).append(e)
        for r in rows:
            self._rows.setdefault(r["user_id"], []).append(r)
        return {r["user_id"] for r in rows}

    def _make_memories(self, users: set[str]) -> None:
        """(Re)make the tail memories of ``users`` from all their uncovered rows."""
        assert self._statements is not None
        rows = [r for u in users for r in self._rows.get(u, [])]
        for u in users:
            self._memories.pop(u, None)
            self._terms.pop(u, None)
            self._hidden.pop(u, None)
        if not rows:
            return
        self._con.register("tail_rows", pa.Table.from_pylist(rows, schema=ROW_SCHEMA))
        self._con.register("tail_extractions", pa.Table.from_pylist(
            [e for u in users for e in self._extractions.get(u, [])], schema=EXTRACTION_SCHEMA))
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        made = dicts(self._con.execute(self._statements["tail_memories"], [now]))
        made = [m for m in made if m["memory_id"] not in self._tombstones.memories]
        self._embed(made)
        by_id = {m["memory_id"]: m["content"] for m in made}
        for m in made:
            self._memories.setdefault(m["user_id"], []).append(m)
        new = [m for m in made if (m["memory_id"], m["content"]) not in self._term_cache]
        if new:  # term rows depend on the content alone: each memory's are made once
            self._con.register("tail_memory_rows", pa.Table.from_pylist(
                [{"memory_id": m["memory_id"], "user_id": m["user_id"], "content": m["content"]} for m in new]))
            for m in new:
                self._term_cache[(m["memory_id"], m["content"])] = []
            for t in dicts(self._con.execute(self._statements["tail_terms"])):
                self._term_cache[(t["memory_id"], by_id[t["memory_id"]])].append(t)
        for m in made:
            self._terms.setdefault(m["user_id"], []).extend(self._term_cache[(m["memory_id"], m["content"])])

    def _check_snapshot(self, users: set[str]) -> None:
        """Which tail memories of ``users`` the snapshot holds (same memory_id) or the build folds
        into another memory (the published tail_merged statement): those are not shown."""
        assert self._statements is not None
        cursor = self._check_cursor()
        mems = [m for u in users for m in self._memories.get(u, [])]
        cursor.register("tail_candidates_arrow", pa.Table.from_pylist(
            [{c: m.get(c) for c in CANDIDATE_SCHEMA.names} for m in mems], schema=CANDIDATE_SCHEMA))
        hidden = {r[0] for r in cursor.execute(self._statements["tail_merged"]).fetchall()}
        hidden |= {r[0] for r in cursor.execute("select memory_id from tail_held").fetchall()}
        for u in users:
            self._hidden[u] = {m["memory_id"] for m in self._memories.get(u, []) if m["memory_id"] in hidden}

    def _check_cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of the tail's snapshot connection with the views tail_merged reads."""
        con = self._reader.connection()
        if self._check is not None and self._check[0] is con:
            return self._check[1]
        cur = con.cursor()
        snap = sql_ident(str(con.execute("select current_database()").fetchone()[0]))
        ltm = f"{snap}.main.long_term_memory"
        emb = f"embedding::float[{int(self._dim)}] as embedding"
        cur.register("tail_candidates_arrow", pa.Table.from_pylist([], schema=CANDIDATE_SCHEMA))
        for view in (
            f"tail_candidates as select memory_id, user_id, kind, slot, created_at, {emb} from tail_candidates_arrow",
            f"tail_prior_memories as select user_id, kind, slot, embedding from {ltm}"
            " where user_id in (select user_id from tail_candidates)",
            f"tail_held as select t.memory_id from tail_candidates as t"
            f" where exists (select 1 from {ltm} as s where s.user_id = t.user_id and s.memory_id = t.memory_id)",
        ):
            cur.execute("create or replace temp view " + view)
        self._check = (con, cur)
        return cur

    def _make_user_tails(self, users: set[str]) -> None:
        """The visible tail memories of ``users`` as arrays, with their BM25 statistics (published
        tail_term_stats over the visible tail memories' term rows)."""
        assert self._statements is not None
        visible = {u: [m for m in self._memories.get(u, []) if m["memory_id"] not in self._hidden.get(u, set())]
                   for u in users}
        ids = {m["memory_id"] for ms in visible.values() for m in ms}
        terms = [t for u in users for t in self._terms.get(u, []) if t["memory_id"] in ids]
        self._con.register("tail_term_rows", pa.Table.from_pylist(terms, schema=TERM_SCHEMA))
        stats: dict[str, list[dict[str, Any]]] = {}
        for s in dicts(self._con.execute(self._statements["tail_term_stats"])):
            stats.setdefault(s["user_id"], []).append(s)
        links, turns = self._turns(visible)
        for u, mems in visible.items():
            if mems:
                self._users[u] = UserTail.of(mems, [t for t in self._terms.get(u, []) if t["memory_id"] in ids],
                                             stats.get(u, []), MEMORY_COLUMNS, links.get(u), turns.get(u),
                                             self._lift_turns)
            else:
                self._users.pop(u, None)

    @contextmanager
    def _snapshot_cursor(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, str]]:
        """A cursor of the reader's snapshot connection and the snapshot's quoted database name."""
        con = self._reader.connection()
        cur = con.cursor()
        try:
            yield cur, sql_ident(str(con.execute("select current_database()").fetchone()[0]))
        finally:
            cur.close()

    def _turns(self, visible: dict[str, list[dict[str, Any]]]) -> tuple[dict[str, dict[str, np.ndarray]],
                                                                         dict[str, dict[str, np.ndarray]]]:
        """Per user, over the snapshot's memories of the user and the visible tail memories (one
        view of both): the turn context's links (published turn_links, as the next build will
        compute them) and, when the recall has the conversation lift, each memory's turn
        (memory_id, id64, session, seq: recall_shim/serving/window.py makes the windows)."""
        mems = [{c: m.get(c) for c in LINK_SCHEMA.names} for ms in visible.values() for m in ms]
        if not mems or (self._links_sql is None and self._lift_turns is None):
            return {}, {}
        with self._snapshot_cursor() as (cur, snap):
            cur.register("tail_link_arrow", pa.Table.from_pylist(mems, schema=LINK_SCHEMA))
            cur.execute("create or replace temp view long_term_memory as select memory_id, user_id, kind, valid_to,"
                        f" turn_session_id, turn_seq from {snap}.main.long_term_memory"
                        " where user_id in (select user_id from tail_link_arrow)"
                        " union all by name select * from tail_link_arrow")
            links = cur.execute(self._links_sql).fetchnumpy() if self._links_sql is not None else None
            turns = None
            if self._lift_turns is not None:
                turns = cur.execute("select user_id, memory_id, (md5_number_upper(memory_id) >> 2)::bigint as id64,"
                                    " turn_session_id as session, turn_seq::bigint as seq from long_term_memory"
                                    " where valid_to is null and turn_session_id is not null"
                                    " and turn_seq is not null").fetchnumpy()
        return _by_user(links), _by_user(turns)

    def _embed(self, memories: list[dict[str, Any]]) -> None:
        """Each memory's vector: the store's model, the form the build embeds its kind in."""
        by_form: dict[str, list[str]] = {}
        for m in memories:
            key = (m["embedding_form"], m["content"])
            if key not in self._emb:
                by_form.setdefault(m["embedding_form"], []).append(m["content"])
        for form, texts in by_form.items():
            texts = sorted(set(texts))
            for text, vec in zip(texts, embed_texts(self._model, form, texts)):
                self._emb[(form, text)] = [float(x) for x in vec]
        for m in memories:
            m["embedding"] = self._emb[(m["embedding_form"], m["content"])]

    def unbuilt_memory(self, memory_id: str) -> tuple[str, list[str]] | None:
        """(owner, source message ids) of a tail memory the snapshot does not hold, else None."""
        with self._lock:
            for user, mems in self._memories.items():
                for m in mems:
                    if m["memory_id"] == memory_id and memory_id not in self._hidden.get(user, ()):
                        return user, list(m["source_message_ids"])
        return None

    # --- answering ---------------------------------------------------------------------------
    def recall(self, reader: SnapshotReader, state: TailState, user_id: str, vectors: Sequence[Sequence[float]],
               top_k: int, min_sim: float, kinds: Sequence[str] | None, texts: Sequence[str | None] | None,
               agent_id: str | None, session_id: str | None) -> list[list[RecalledMemory]]:
        """The snapshot's compiled recall statement over the snapshot's and ``state``'s memories
        (what the index does not serve: recall_shim/serving/tail_compiled.py)."""
        users, memories = pending_forget(self.paths)
        if user_id in users:
            return [[] for _ in vectors]
        found = self._compiled.recall(reader, state.users, state, state.stats_sql or "", state.dim, user_id, vectors,
                                      top_k, min_sim, kinds, texts, agent_id, session_id)
        if memories:
            found = [[m for m in group if m.memory_id not in memories] for group in found]
        return found

    def close(self) -> None:
        """Stop the worker and let go of the connections (the tail is re-read on the next sync)."""
        self._stop_worker()
        with self._lock:
            self._compiled.close()
            self._check = None
            self._reader.close()
            self._snapshot = None
            self._clear()
            self._publish(TailState())


def _by_user(found: dict[str, np.ndarray] | None) -> dict[str, dict[str, np.ndarray]]:
    """Columns with a user_id column, split per user (an object array per column)."""
    if found is None:
        return {}
    users = np.asarray(found["user_id"], dtype=object)
    return {u: {k: np.asarray(v)[users == u] for k, v in found.items()} for u in set(users.tolist())}
