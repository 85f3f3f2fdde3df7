"""Read side: open the newest published serving snapshot read-only and run its compiled recall
statement with bound parameters. No dbt, no Jinja, no lock the builder needs."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import duckdb
import numpy as np

from recall_shim.errors import SnapshotIncomplete, StoreNotBuilt
from recall_shim.forget.journal import pending_forget
from recall_shim.serving.formula import FormulaError, RecallFormula
from recall_shim.serving.fusion import HYBRID_FUSIONS, fusion_of
from recall_shim.serving.hybrid import HybridSearcher, Unserved
from recall_shim.serving.index import Hit, Payload, SnapshotIndex, index_dir
from recall_shim.common.paths import StorePaths
from recall_shim.serving.published import ready_snapshots
from recall_shim.serving.recalled import RecalledMemory
from recall_shim.serving.snapshot import connect_snapshot
from recall_shim.serving.tail_search import UserTail, search_with_tail

# The index reproduces the compiled statement for the vector-only fusion (recall_shim/serving/index.py)
# and, with the term postings beside it, for the hybrid fusions (recall_shim/serving/hybrid.py,
# recall_shim/serving/terms.py; docs/serving.md). What neither can answer runs as compiled.
INDEXED_FUSION = "vector"
# how often a reader lists the published snapshots again when all it listed went meanwhile
REFRESH_ATTEMPTS = 5
# A folder's mtime has the clock's tick as its resolution: a change in the tick of a listing can
# leave the mtime as it was, so a listing is trusted unchanged only once its mtime is this old.
SETTLED_NS = 1_000_000_000


@dataclass
class RecallSettings:
    sql_text: str
    similarity_sql: str
    fusion_method: str
    embedding_model: str
    embedding_dim: int
    embedding_query_form: str
    default_top_k: int
    default_min_sim: float
    max_top_k: int
    max_query_chars: int


@dataclass
class SnapshotReader:
    """Holds one open snapshot; reopens when a newer one is published."""

    paths: StorePaths
    _path: Path | None = None
    _con: duckdb.DuckDBPyConnection | None = None
    _settings: RecallSettings | None = None
    _known_users: set[str] = field(default_factory=set)
    _index: SnapshotIndex | None = None
    _index_tried: bool = False  # an index folder was there for this snapshot (used or not)
    _hybrid: HybridSearcher | None = None  # the hybrid fusions from the index (None: compiled)
    _recall_row: dict[str, Any] = field(default_factory=dict)  # the snapshot's recall_queries rows
    _settled: int | None = None  # mtime of the serving folder when nothing was left to look for
    with_index: bool = True  # False: the snapshot's tables only (the hot tail's worker: no index in RAM twice)

    def refresh(self) -> None:
        """Serve the newest complete snapshot. Publishing, pruning and forgetting all add or
        remove files of the serving folder, so an unchanged folder mtime (a stat, not a listing)
        means nothing to do once the snapshot and its index are open."""
        try:
            mtime: int | None = os.stat(self.paths.serving).st_mtime_ns
        except OSError:
            mtime = None
        if mtime is not None and mtime == self._settled and self._con is not None:
            return
        self._refresh()
        if mtime is not None and self._index_tried and time.time_ns() - mtime > SETTLED_NS:
            self._settled = mtime

    def _refresh(self) -> None:
        self._settled = None
        ready = ready_snapshots(self.paths)
        if not ready:
            raise StoreNotBuilt(
                f"no published snapshot for {self.paths.db}: run `agent-memory build --db {self.paths.db}` first"
            )
        newest = ready[-1]
        if newest == self._path and self._con is not None:
            if not self._index_tried and (index_dir(newest) / "meta.json").exists():
                self._index = self._open_index(newest)  # published after the snapshot
            return
        con = None
        for _ in range(REFRESH_ATTEMPTS):
            for candidate in reversed(ready):  # newest complete snapshot (all its layer files exist)
                if candidate == self._path and self._con is not None:
                    return
                try:
                    con = connect_snapshot(candidate)
                except (SnapshotIncomplete, FileNotFoundError, duckdb.IOException):
                    continue  # a layer (or the file) pruned or forgotten meanwhile: an older one serves
                newest = candidate
                break
            if con is not None:
                break
            # every listed snapshot went while we looked (a forget or prune published a newer one)
            again = ready_snapshots(self.paths)
            if again == ready:
                break
            ready = again
        if con is None:
            raise StoreNotBuilt(f"no complete published snapshot for {self.paths.db}: run `agent-memory build` again")
        rows = {r[0]: r[1:] for r in con.execute(
            "select query_name, sql_text, fusion_method, embedding_model,"
            " embedding_dim, embedding_query_form, default_top_k, default_min_sim, max_top_k, max_query_chars"
            " from recall_queries"
        ).fetchall()}
        if "recall" not in rows or "similarity_distribution" not in rows:
            con.close()
            raise StoreNotBuilt(f"snapshot {newest} lacks the compiled recall statements: rebuild the store")
        table = con.sql("select * from recall_queries").to_arrow_table().to_pylist()
        self.close()
        self._recall_row = {r["query_name"]: r for r in table}
        self._con, self._path = con, newest
        recall = rows["recall"]
        self._settings = RecallSettings(recall[0], rows["similarity_distribution"][0], *recall[1:])
        self._index = self._open_index(newest)

    def _open_index(self, snapshot: Path) -> SnapshotIndex | None:
        assert self._settings is not None
        self._index_tried = (index_dir(snapshot) / "meta.json").exists() or not self.with_index
        if not self.with_index:
            return None
        s = self._settings
        self._hybrid = None
        hybrid = fusion_of(self._recall_row) if s.fusion_method in HYBRID_FUSIONS else None
        if s.fusion_method != INDEXED_FUSION and hybrid is None:
            return None  # a snapshot from before the hybrid was indexed: run as compiled
        if hybrid is not None and not (index_dir(snapshot) / "terms" / "meta.json").exists():
            self._index_tried = False  # the term postings come after the index: look again next time
            return None
        try:  # the snapshot's recall score, compiled once for this snapshot (serving/formula.py)
            formula = RecallFormula.of_row(self._recall_row.get("recall", {}))
        except FormulaError:
            return None  # published before recall_queries carried it, or refused: run as compiled
        index = SnapshotIndex.open(snapshot, formula)
        if index is not None and index.dim != self._settings.embedding_dim:
            return None
        if index is not None and hybrid is not None:
            try:
                self._hybrid = HybridSearcher(index, *hybrid)
            except (FileNotFoundError, ValueError, OSError):
                index.close()
                return None
        return index

    def ivf_user(self, user_id: str) -> bool:
        """Whether the serving index holds a per-user IVF for ``user_id`` (more than
        recall_index_min_rows memories: the compiled statement over such a user costs hundreds of
        milliseconds to seconds)."""
        self.refresh()
        return self._index is not None and user_id in self._index.meta["ivf"]

    @property
    def indexed(self) -> bool:
        """Whether recall is served by the snapshot's index (else by the compiled statement)."""
        return self._index is not None

    @property
    def settings(self) -> RecallSettings:
        self.refresh()
        assert self._settings is not None
        return self._settings

    @property
    def snapshot_path(self) -> Path | None:
        return self._path

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The open connection of the newest snapshot (refreshed first); valid until the next refresh."""
        self.refresh()
        assert self._con is not None
        return self._con

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
        self._con = None
        self._path = None
        if self._index is not None:
            self._index.close()
        self._index = None
        self._hybrid = None
        self._index_tried = False

    def similarities(self, user_id: str, vectors: Sequence[Sequence[float]]) -> list[list[float]]:
        """Every cosine of the user's current memories against each vector (threshold guidance)."""
        self.refresh()
        assert self._con is not None and self._settings is not None
        users, _ = pending_forget(self.paths)
        if user_id in users:
            return [[] for _ in vectors]
        rows = self._con.execute(self._settings.similarity_sql, [user_id, [list(v) for v in vectors]]).fetchall()
        out: list[list[float]] = [[] for _ in vectors]
        for intent_id, _memory_id, _kind, sim in rows:
            out[intent_id - 1].append(float(sim))
        return out

    def run(
        self,
        user_id: str,
        vectors: Sequence[Sequence[float]],
        top_k: int,
        min_sim: float,
        kinds: Sequence[str] | None,
        texts: Sequence[str | None] | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> list[list[RecalledMemory]]:
        """Run the compiled statement for several intents at once; one result list per intent.
        ``texts`` are the query texts for the lexical leg (None for precomputed vectors);
        ``agent_id`` / ``session_id`` narrow the user scope (None: no narrowing). Nothing of a
        forget in progress is returned (recall_shim/forget/journal.py)."""
        users, memories = pending_forget(self.paths)
        if user_id in users:
            self.refresh()
            return [[] for _ in vectors]
        try:
            found = self._run(user_id, vectors, top_k, min_sim, kinds, texts, agent_id, session_id)
        except (FileNotFoundError, duckdb.IOException):
            # the snapshot's index files went (a forget or prune after a newer publish): the newer one answers
            self.close()
            found = self._run(user_id, vectors, top_k, min_sim, kinds, texts, agent_id, session_id)
        if memories:
            found = [[m for m in group if m.memory_id not in memories] for group in found]
        return found

    def _run(
        self,
        user_id: str,
        vectors: Sequence[Sequence[float]],
        top_k: int,
        min_sim: float,
        kinds: Sequence[str] | None,
        texts: Sequence[str | None] | None,
        agent_id: str | None,
        session_id: str | None,
    ) -> list[list[RecalledMemory]]:
        self.refresh()
        assert self._con is not None and self._settings is not None
        if not vectors:
            return []
        if self._index is not None and agent_id is None and session_id is None:  # the index has no provenance
            if self._hybrid is not None:
                try:
                    return self._run_hybrid(user_id, vectors, top_k, min_sim, kinds, texts)
                except Unserved:
                    pass  # e.g. rrf for a user with an IVF: the compiled statement answers
            else:
                return self._run_indexed(user_id, vectors, top_k, min_sim, kinds)
        return run_compiled(self._con, self._settings.sql_text, user_id, vectors, top_k, min_sim, kinds, texts,
                            agent_id, session_id)

    def run_with_tail(self, user_id: str, vectors: Sequence[Sequence[float]], top_k: int, min_sim: float,
                      kinds: Sequence[str] | None, texts: Sequence[str | None] | None,
                      tail: UserTail) -> list[list[RecalledMemory]] | None:
        """The answer over the user's snapshot memories and hot-tail memories ``tail`` from the
        index (recall_shim/serving/tail_search.py), or None when the index does not serve it (the
        caller runs the compiled statement over both). Refresh first (``settings``)."""
        users, memories = pending_forget(self.paths)
        if user_id in users:
            return [[] for _ in vectors]
        if self._hybrid is None or self._con is None or not vectors:
            return None
        try:
            groups = search_with_tail(self._hybrid, self._con, user_id, np.asarray(vectors, dtype=np.float64), texts,
                                      int(top_k), float(min_sim), kinds, tail)
        except Unserved:
            return None
        out = []
        for intent, hits in enumerate(groups):
            group = []
            for rank, h in enumerate(hits, start=1):
                if h.memory_id in memories:
                    continue
                payload = tail.payload_of(-h.row - 1) if h.row < 0 else self._hybrid.index.payload_of(h.row)
                group.append(_memory(h, payload, rank, intent))
            out.append(group)
        return out

    def _run_indexed(
        self,
        user_id: str,
        vectors: Sequence[Sequence[float]],
        top_k: int,
        min_sim: float,
        kinds: Sequence[str] | None,
    ) -> list[list[RecalledMemory]]:
        """The compiled statement's answer, from the index (see recall_shim/serving/index.py)."""
        assert self._index is not None
        return _recalled(self._index, self._index.search(user_id, np.asarray(vectors, dtype=np.float64), top_k,
                                                         min_sim, kinds))

    def _run_hybrid(
        self,
        user_id: str,
        vectors: Sequence[Sequence[float]],
        top_k: int,
        min_sim: float,
        kinds: Sequence[str] | None,
        texts: Sequence[str | None] | None,
    ) -> list[list[RecalledMemory]]:
        """The compiled statement's hybrid answer, from the index (see recall_shim/serving/hybrid.py)."""
        assert self._hybrid is not None and self._con is not None
        index = self._hybrid.index
        found = self._hybrid.search(self._con, user_id, np.asarray(vectors, dtype=np.float64), texts, int(top_k),
                                    float(min_sim), kinds)
        return _recalled(index, found)


def run_compiled(con: duckdb.DuckDBPyConnection, sql_text: str, user_id: str, vectors: Sequence[Sequence[float]],
                 top_k: int, min_sim: float, kinds: Sequence[str] | None, texts: Sequence[str | None] | None,
                 agent_id: str | None, session_id: str | None) -> list[list[RecalledMemory]]:
    """Run a compiled recall statement (recall_queries 'recall') on ``con`` with bound parameters."""
    rows = con.execute(sql_text, [user_id, [list(v) for v in vectors], int(top_k), float(min_sim),
                                  None if kinds is None else list(kinds),
                                  list(texts) if texts is not None else [None] * len(vectors), agent_id,
                                  session_id]).fetchall()
    out: list[list[RecalledMemory]] = [[] for _ in vectors]
    for row in rows:
        m = RecalledMemory.of_row(row)
        if m is not None:
            out[m.intent].append(m)
    return out


def _recalled(index: SnapshotIndex, groups: list[list[Hit]]) -> list[list[RecalledMemory]]:
    """Index hits (one list per intent, best first) as RecalledMemory rows with their payload."""
    out: list[list[RecalledMemory]] = []
    for intent, hits in enumerate(groups):
        group = []
        for rank, h in enumerate(hits, start=1):
            group.append(_memory(h, index.payload_of(h.row), rank, intent))
        out.append(group)
    return out


def _memory(h: Hit, p: Payload, rank: int, intent: int) -> RecalledMemory:
    """An index or tail hit with its payload as the RecalledMemory the compiled statement's row makes."""
    return RecalledMemory(h.memory_id, h.kind, p.content, h.similarity, h.strength, h.score, list(p.sources), rank,
                          intent, h.lexical_score, p.said_at, p.happened_on, p.happened_grain)
