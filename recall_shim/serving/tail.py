"""The hot tail: messages landed since the newest snapshot, recallable before the next build
(docs/serving.md "Hot tail").

A build records which landing files its snapshot covers (``record_covered``: the message files
listed before dbt started, all of which the build loads). A reader lists the messages folder when
it changed, reads the files the record does not cover, and makes their memories with the
statements the build published in ``recall_queries`` (macros/tail.sql: the build's own typing,
checks, episode extraction, memory ids, strength fold and term rows), embedding each new text
once with the store's model. A user with tail memories is recalled by the snapshot's compiled
recall statement over the snapshot's rows plus the tail's (temporary views on a cursor of the
snapshot connection: ``long_term_memory``, ``memory_term_index`` and ``memory_term_stats``, whose
statistics are recomputed over both with the build's macro): one score definition, the min-max
of cosine and BM25's statistics over the same memories the next build serves. A tail memory
whose memory_id the snapshot holds is left out (the snapshot's row answers). Forget tombstones
drop the forgotten rows; a new tombstone rebuilds the tail.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import duckdb
import pyarrow as pa

from recall_shim.common.embedding import embed_texts
from recall_shim.common.paths import StorePaths
from recall_shim.common.sql import sql_ident
from recall_shim.forget.journal import pending_forget
from recall_shim.serving.reader import RecalledMemory, SnapshotReader, run_compiled
from recall_shim.serving.tail_files import (CANDIDATE_SCHEMA, COVERED_RECORD, EXTRACTION_SCHEMA, LANDED_SCHEMA,
                                            MEMORY_COLUMNS, MEMORY_SCHEMA, ROW_SCHEMA, TERM_SCHEMA, dicts, jsonl_names,
                                            landed_message_files, landed_row, read_jsonl, file_stamp)

__all__ = ["HotTail"]

RELOOK_NS = 2_000_000_000
STATEMENTS = ("tail_seeds", "tail_rows", "tail_extractions", "tail_memories", "tail_terms", "tail_term_stats",
              "tail_merged")


class HotTail:
    """The tail of one store, kept by one reader (the store's recall path; thread-safe)."""

    def __init__(self, paths: StorePaths) -> None:
        self.paths = paths
        self._lock = threading.Lock()
        self._con = duckdb.connect()  # runs the published tail statements
        self._emb: dict[tuple[str, str], list[float]] = {}  # (form, content) -> vector, embedded once
        self._clear()
        self._snapshot: Path | None = None
        self._statements: dict[str, str] | None = None
        self._model = ""
        self._dim = 0
        self._view_con: Any = None  # the snapshot connection the cursor's views were made on
        self._cursor: duckdb.DuckDBPyConnection | None = None
        self._registered = -1
        self._snap_relations = ("", "")

    def _clear(self) -> None:
        self._rows: dict[str, list[dict[str, Any]]] = {}  # user -> accepted rows of uncovered files
        self._extractions: dict[str, list[dict[str, Any]]] = {}  # user -> their extractions (with landing_file)
        self._files: set[str] = set()  # files read (uncovered when read)
        self._memories: dict[str, list[dict[str, Any]]] = {}  # user -> tail memory rows
        self._terms: dict[str, list[dict[str, Any]]] = {}  # user -> their term rows
        self._hidden: dict[str, set[str]] = {}  # user -> tail memory ids the snapshot holds or folds in
        self._stamps: dict[str, Any] = {}  # key -> (stat stamp, when looked at)
        self._tombstone_names: list[str] = []
        self._covered: frozenset[str] = frozenset()
        self._forgotten_users: dict[str, str] = {}  # user -> forgotten_at
        self._forgotten: set[tuple[str, str]] = set()  # (user, message_id)
        self._forgotten_memories: set[str] = set()
        self._version = 0

    def reset(self) -> None:
        """Forget everything read (e.g. after a forget in this process); the next sync re-reads."""
        with self._lock:
            self._clear()

    # --- keeping up --------------------------------------------------------------------------
    def sync(self, reader: SnapshotReader) -> None:
        """Read what landed since the last look and make its memories (cheap when nothing did)."""
        with self._lock:
            con = reader.connection()
            if reader.snapshot_path != self._snapshot:
                self._snapshot = reader.snapshot_path
                self._load_statements(con)
                self._hidden = {}  # re-checked against the new snapshot below
                self._stamps.pop("covered", None)
                self._stamps.pop("messages", None)
            if self._statements is None:
                return
            touched: set[str] = set()
            if self._looked_at("forget", self.paths.forget):
                names = jsonl_names(self.paths.forget)
                if names != self._tombstone_names:  # a forget: start again from the rewritten files
                    stamps = self._stamps
                    self._clear()
                    self._stamps = {"forget": stamps["forget"]}
                    self._tombstone_names = names
                    self._read_tombstones(names)
            if self._looked_at("covered", self.paths.serving / COVERED_RECORD):
                touched |= self._apply_covered()
            if self._looked_at("messages", self.paths.messages):
                touched |= self._read_new_files()
            touched |= {u for u in self._memories if u not in self._hidden}
            if touched:
                self._make_memories(touched)
                self._check_snapshot(reader, touched)
                self._version += 1

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
                                " where list_contains(?::varchar[], query_name)", [list(STATEMENTS)]).fetchall())
        settings = con.execute("select embedding_model, embedding_dim from recall_queries"
                               " where query_name = 'recall'").fetchone()
        self._statements = rows if set(STATEMENTS) <= set(rows) and settings else None
        if self._statements is not None:
            self._con.execute(self._statements["tail_seeds"])  # the rules' seed tables, once per snapshot
        if settings:
            self._model, self._dim = str(settings[0]), int(settings[1])
        self._view_con = None

    def _read_tombstones(self, names: list[str]) -> None:
        for name in names:
            for t in read_jsonl(self.paths.forget / name):
                user, at = t.get("user_id"), str(t.get("forgotten_at") or "")
                if t.get("scope") == "user" and isinstance(user, str):
                    self._forgotten_users[user] = max(at, self._forgotten_users.get(user, ""))
                elif t.get("scope") == "memory" and isinstance(t.get("memory_id"), str):
                    self._forgotten_memories.add(t["memory_id"])
                elif t.get("scope") == "message" and isinstance(user, str) and isinstance(t.get("message_id"), str):
                    self._forgotten.add((user, t["message_id"].strip()))

    def _apply_covered(self) -> set[str]:
        """Drop the rows of files the newest build loaded; returns the users whose rows changed."""
        try:
            record = json.loads((self.paths.serving / COVERED_RECORD).read_text(encoding="utf-8"))
            covered = frozenset(str(f) for f in record["files"])
        except (OSError, ValueError, KeyError, TypeError):
            covered = self._covered_by_time()
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

    def _covered_by_time(self) -> frozenset[str]:
        """Without a record (a store built by plain ``dbt build``): the files written before the
        newest snapshot was marked ready count as covered (a file landed during that build shows
        only after the next one)."""
        if self._snapshot is None:
            return frozenset()
        ready = self._snapshot.with_suffix(self.paths.layout.ready)
        try:
            cut = datetime.fromtimestamp(ready.stat().st_mtime, timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        except FileNotFoundError:
            return frozenset()
        return frozenset(n for n in landed_message_files(self.paths) if n < cut)

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
                    if row["user_id"] is not None and not self._is_forgotten(row)]
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

    def _is_forgotten(self, row: dict[str, Any]) -> bool:
        user = row["user_id"]
        at = self._forgotten_users.get(user)
        if at is not None and str(row.get("landed_at") or "") <= at:
            return True
        return (user, str(row.get("message_id") or "").strip()) in self._forgotten

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
        made = [m for m in made if m["memory_id"] not in self._forgotten_memories]
        self._embed(made)
        for m in made:
            self._memories.setdefault(m["user_id"], []).append(m)
        if made:
            self._con.register("tail_memory_rows", pa.Table.from_pylist(
                [{"memory_id": m["memory_id"], "user_id": m["user_id"], "content": m["content"]} for m in made]))
            for t in dicts(self._con.execute(self._statements["tail_terms"])):
                self._terms.setdefault(t["user_id"], []).append(t)

    def _check_snapshot(self, reader: SnapshotReader, users: set[str]) -> None:
        """Which tail memories of ``users`` the snapshot holds (same memory_id) or the build folds
        into another memory (the published tail_merged statement): those are not shown."""
        assert self._statements is not None
        cursor = self._views(reader)
        mems = [m for u in users for m in self._memories.get(u, [])]
        cursor.register("tail_candidates_arrow", pa.Table.from_pylist(
            [{c: m.get(c) for c in CANDIDATE_SCHEMA.names} for m in mems], schema=CANDIDATE_SCHEMA))
        hidden = {r[0] for r in cursor.execute(self._statements["tail_merged"]).fetchall()}
        hidden |= {r[0] for r in cursor.execute("select memory_id from tail_held").fetchall()}
        for u in users:
            self._hidden[u] = {m["memory_id"] for m in self._memories.get(u, []) if m["memory_id"] in hidden}
        self._version += 1

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
    def serves(self, user_id: str) -> bool:
        """Whether ``user_id`` has tail memories the snapshot does not hold."""
        with self._lock:
            hidden = self._hidden.get(user_id, set())
            return any(m["memory_id"] not in hidden for m in self._memories.get(user_id, []))

    def recall(self, reader: SnapshotReader, user_id: str, vectors: Sequence[Sequence[float]], top_k: int,
               min_sim: float, kinds: Sequence[str] | None, texts: Sequence[str | None] | None,
               agent_id: str | None, session_id: str | None) -> list[list[RecalledMemory]]:
        """The snapshot's compiled recall statement over the snapshot's and the tail's memories."""
        users, memories = pending_forget(self.paths)
        if user_id in users:
            return [[] for _ in vectors]
        if reader.connection() is not None and reader.snapshot_path != self._snapshot:
            self.sync(reader)  # a build published since the sync: the tail follows it first
        with self._lock:
            settings = reader.settings
            cursor = self._views(reader)
            found = run_compiled(cursor, settings.sql_text, user_id, vectors, top_k, min_sim, kinds, texts,
                                 agent_id, session_id)
        if memories:
            found = [[m for m in group if m.memory_id not in memories] for group in found]
        return found

    def _views(self, reader: SnapshotReader) -> duckdb.DuckDBPyConnection:
        """A cursor of the snapshot connection whose temporary views put the tail beside the
        snapshot's tables under their names (the compiled statement names them unqualified)."""
        con = reader.connection()
        assert self._statements is not None
        if self._view_con is con and self._cursor is not None:
            if self._registered != self._version:
                self._register(self._cursor)
            return self._cursor
        cur = con.cursor()
        snap = sql_ident(str(con.execute("select current_database()").fetchone()[0]))
        ltm, terms, stats = (f"{snap}.main.{t}" for t in ("long_term_memory", "memory_term_index", "memory_term_stats"))
        emb = f"embedding::float[{int(self._dim)}] as embedding"
        cols = ", ".join(MEMORY_COLUMNS)
        cur.register("tail_candidates_arrow", pa.Table.from_pylist([], schema=CANDIDATE_SCHEMA))
        self._snap_relations = (ltm, terms)
        self._register(cur)
        for view in (
            f"tail_candidates as select memory_id, user_id, kind, slot, created_at, {emb} from tail_candidates_arrow",
            f"tail_prior_memories as select user_id, kind, slot, embedding from {ltm}"
            " where user_id in (select user_id from tail_candidates)",
            f"tail_held as select t.memory_id from tail_candidates as t"
            f" where exists (select 1 from {ltm} as s where s.user_id = t.user_id and s.memory_id = t.memory_id)",
            # the tail's visible memories and term rows are tables of this cursor (_register); the
            # snapshot's rows of a memory_id are never among them (hidden when the tail was made)
            f"long_term_memory as select {cols} from {ltm} union all by name select {cols} from tail_mem",
            f"memory_term_index as select memory_id, user_id, term, tf, doc_len from {terms}"
            " union all select memory_id, user_id, term, tf, doc_len from tail_term",
            f"memory_term_stats as select user_id, term, df, n_docs, avg_doc_len from {stats}"
            " where user_id not in (select user_id from tail_mem)"
            " union all select user_id, term, df, n_docs, avg_doc_len from tail_stat",
        ):
            cur.execute("create or replace temp view " + view)
        self._cursor, self._view_con = cur, con
        return cur

    def _register(self, cur: duckdb.DuckDBPyConnection) -> None:
        """The visible tail memories, their term rows and their users' term statistics (over the
        snapshot's rows and the tail's: published tail_term_stats) as tables of the cursor."""
        assert self._statements is not None
        mems = [{c: m.get(c) for c in MEMORY_COLUMNS} for u, ms in self._memories.items() for m in ms
                if m["memory_id"] not in self._hidden.get(u, ())]
        ids = {m["memory_id"] for m in mems}
        terms = [t for ts in self._terms.values() for t in ts if t["memory_id"] in ids]
        cur.register("tail_memory_arrow", pa.Table.from_pylist(mems, schema=MEMORY_SCHEMA))
        cur.register("tail_terms_arrow", pa.Table.from_pylist(terms, schema=TERM_SCHEMA))
        ltm, index = self._snap_relations
        emb = f"embedding::float[{int(self._dim)}] as embedding"
        cur.execute("create or replace temp table tail_mem as select "
                    + ", ".join(MEMORY_COLUMNS).replace("embedding", emb, 1) + " from tail_memory_arrow")
        cur.execute("create or replace temp table tail_term as select * from tail_terms_arrow")
        cur.execute(f"""create or replace temp view tail_term_rows as
            select memory_id, user_id, term, doc_len from {index} where user_id in (select user_id from tail_mem)
            union all select memory_id, user_id, term, doc_len from tail_term""")
        cur.execute(f"create or replace temp table tail_stat as {self._statements['tail_term_stats']}")
        self._registered = self._version

    def close(self) -> None:
        """Let go of the snapshot connection's cursor (the tail is re-read on the next sync)."""
        with self._lock:
            self._cursor = None
            self._view_con = None
            self._snapshot = None
            self._clear()
