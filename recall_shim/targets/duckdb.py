"""MemoryStore: the one object the library, the CLI and (later) the server use."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import duckdb
import numpy as np
import pyarrow as pa

from recall_shim.errors import (DBT_PLAIN_OUTPUT, STORE_BUILD_EXCLUDES, AccessNotRecorded, BuildFailed, InvalidInput,
                                 InvalidQuery, StorageFailure, StoreBusy, StoreNotBuilt, plain_text)
from recall_shim.build.parse_cache import keep_parse, parse_key, seed_parse
from recall_shim.build.inputs import (SEEDS_CURRENT_SELECT, UNCHANGED_NOTE, drop_build_record, inputs_before, record_build,
                                      seeds_current, unchanged_since_last_build)
from recall_shim.forget.duckdb import ForgetReport, complete_pending_forget, forget
from recall_shim.forget.journal import storage_errors
from recall_shim.write.door import admit, admit_strict
from recall_shim.write.ids import forget_id
from recall_shim.write.landing import read_input_file, utc_now_iso, write_landing_file
from recall_shim.write.limits import door_limits
from recall_shim.common.locks import file_lock
from recall_shim.common.paths import CONTRACT_VARS, StorePaths, data_dir, project_dir
from recall_shim.serving.published import prune_snapshots, update_index
from recall_shim.serving.reader import RecalledMemory, SnapshotReader
from recall_shim.store import BuildResult, IngestReport, Query, Store, query_vectors, recall_arguments, scope_id
from recall_shim.write.door import refusals
from recall_shim.write.landing import message_row
from recall_shim.serving.snapshot import published_snapshot
from recall_shim.serving.tail import HotTail
from recall_shim.serving.tail_files import landed_message_files, record_covered

DEFAULT_DB_ENV = "AGENT_MEMORY_DB"
SNAPSHOTS_KEPT = 3
# how long a recall waits for the tail's worker after a new snapshot or forget tombstone (then the
# snapshot alone answers until the worker caught up)
TAIL_WAIT_SECONDS = 1.0

def default_db() -> Path:
    """$AGENT_MEMORY_DB, else agent_memory.duckdb in ``data_dir()`` (the checkout's data/ or the
    per-user data folder)."""
    env = os.environ.get(DEFAULT_DB_ENV)
    if env:
        return Path(env)
    return data_dir() / "agent_memory.duckdb"


class MemoryStore(Store):
    """A memory store named by its DuckDB path (see ``docs/architecture.md``).

    Writes (``remember``, ``ingest``, access events) land as immutable files and never touch the
    DuckDB file; ``build`` runs ``dbt build`` and publishes a snapshot; ``recall`` reads the
    newest published snapshot read-only.
    """

    def __init__(self, db: str | os.PathLike[str] | None = None, *, hot_tail: bool = True) -> None:
        self.paths = StorePaths.of(db if db is not None else default_db())
        try:
            self.paths.ensure()
        except OSError as exc:  # a read-only store still serves reads (its folders exist)
            warnings.warn(f"store {self.paths.db} is not writable: {exc.strerror or exc}", AccessNotRecorded,
                          stacklevel=2)
        self._reader = SnapshotReader(self.paths)
        # messages landed since the newest snapshot, recallable before the next build (serving/tail.py)
        self._tail = HotTail(self.paths) if hot_tail else None

    # --- writing -------------------------------------------------------------------------
    def remember(
        self,
        user_id: str,
        content: str,
        *,
        role: str = "user",
        session_id: str = "default",
        msg_seq: int | None = None,
        ts: str | None = None,
        message_id: str | None = None,
        agent_id: str | None = None,
    ) -> str:
        """Append one message to the session log (durable when this returns); returns its id.
        Raises InvalidId (an id breaks the id rule, recall_shim/write/ids.py), ContentTooLong (more than
        var max_content_chars characters), InvalidInput (a wrong type) or StorageFailure (the disk
        refused the write); nothing lands then."""
        row = message_row(user_id, content, role=role, session_id=session_id, msg_seq=msg_seq, ts=ts,
                          message_id=message_id, agent_id=agent_id)
        record = admit_strict(row, utc_now_iso(), door_limits())
        with storage_errors("the message was not stored"):
            self._land_messages([record])
        self._kick_tail()
        return str(record["message_id"])

    def remember_many(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append many session-log rows (dicts with the session-log columns) as one landing file,
        all or none: a row the door refuses raises (like ``remember``, naming the row) and nothing
        lands. Returns how many rows landed."""
        landed_at, limits = utc_now_iso(), door_limits()
        records = [admit_strict(r, landed_at, limits, f"row {i}: ", i) for i, r in enumerate(rows)]
        with storage_errors("the rows were not stored"):
            self._land_messages(records)
        self._kick_tail()
        return len(records)

    def _land_messages(self, records: list[dict[str, Any]]) -> Path | None:
        """Land message records as one file under the shared write lock, stamped ``landed_at``
        inside it: a forget stamps ``forgotten_at`` under the exclusive lock, so every row stamped
        before it has landed by then and its purge removes exactly the rows stamped up to it (a
        stamp taken before waiting for the lock let a row stamped earlier land after the purge)."""
        with file_lock(self.paths.write_lock, exclusive=False):
            now = utc_now_iso()
            for r in records:
                r["landed_at"] = now
            return write_landing_file(self.paths.messages, records)

    def ingest(self, path: str | os.PathLike[str], *, force: bool = False) -> IngestReport:
        """Bulk-load a CSV, JSONL or Parquet file of session-log rows. A file whose bytes were
        ingested into this store before is skipped unless ``force``. Rows the door refuses land
        as rejects with their reason (``IngestReport.refused``); a file that cannot be read as a
        session log (no user_id/content column, broken CSV quoting) raises InvalidInput and
        nothing of it lands."""
        p = Path(path)
        if not p.is_file():
            raise InvalidInput(f"no such file: {p}")
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        marker = self.paths.inbox / "ingested" / digest
        if marker.exists() and not force:
            return IngestReport(str(p), 0, None, skipped=True)
        landed_at, limits = utc_now_iso(), door_limits()
        records = [admit(r, landed_at, limits, i) for i, r in enumerate(read_input_file(p))]
        with storage_errors(f"{p} was not ingested"):
            landing = self._land_messages(records)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps({"file": str(p), "rows": len(records), "at": landed_at}))
        self._kick_tail()
        return IngestReport(str(p), len(records), str(landing) if landing else None,
                            refused=refusals(records))

    def _kick_tail(self) -> None:
        if self._tail is not None:
            self._tail.kick()  # a running tail worker looks now (else a no-op)

    # --- building ------------------------------------------------------------------------
    def build(
        self,
        *,
        full_refresh: bool = False,
        vars: Mapping[str, Any] | None = None,
        select: str | None = None,
        command: str = "build",
    ) -> BuildResult:
        """Run ``dbt <command>`` for this store (builds serialise on a lock file) and publish."""
        proj = project_dir()
        dbt = Path(sys.executable).with_name("dbt")
        args = [str(dbt) if dbt.exists() else "dbt", command, "--project-dir", str(proj), "--profiles-dir", str(proj)]
        if full_refresh:
            args.append("--full-refresh")
        if vars:
            if CONTRACT_VARS & set(vars):
                raise InvalidInput(f"vars {sorted(CONTRACT_VARS & set(vars))} are the project's layout (dbt_project.yml), not run settings")
            args += ["--vars", json.dumps(dict(vars))]
        if select:
            args += ["--select", select]
        elif command == "build":
            args += STORE_BUILD_EXCLUDES
        env = dict(os.environ)
        # dbt runs in the store's folder and names the store by its file name, so that its parse
        # does not depend on where the store lives and is shared (recall_shim/build/parse_cache.py)
        env.update({
            DEFAULT_DB_ENV: self.paths.db.name,
            "DBT_TARGET_PATH": str(self.paths.dbt_dir / "target"),
            "DBT_LOG_PATH": str(self.paths.dbt_dir / "logs"),
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
            **DBT_PLAIN_OUTPUT,
            "OMP_WAIT_POLICY": env.get("OMP_WAIT_POLICY", "passive"),
        })
        started = time.monotonic()
        # a plain build may be skipped when nothing it reads changed (recall_shim/build/inputs.py)
        may_skip = command == "build" and not (full_refresh or vars or select)
        with open(self.paths.build_lock, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            complete_pending_forget(self.paths, lock="held")  # before dbt reads the warehouse
            before = inputs_before(self.paths)
            unchanged = unchanged_since_last_build(self.paths, before) if may_skip else None
            if unchanged is not None:
                return BuildResult(str(unchanged), UNCHANGED_NOTE, time.monotonic() - started, None, skipped=True)
            # a build without --select loads the seeds, or leaves out seeds the last build loaded
            seeds = command == "build" and not select
            if seeds and not full_refresh and seeds_current(self.paths, before):
                args += SEEDS_CURRENT_SELECT
            drop_build_record(self.paths)
            landed = landed_message_files(self.paths)  # all of them are loaded by this build
            parse = parse_key("duckdb", self.paths.db.name, vars)
            seed_parse(self.paths.dbt_dir / "target", parse)
            # dbt inherits the locked descriptor: if this process is killed (kill -9), the orphaned
            # dbt keeps holding the lock until it exits, so the next build waits instead of colliding
            # with it on the warehouse file.
            proc = subprocess.run(args, cwd=self.paths.db.parent, env=env, capture_output=True, text=True,
                                  pass_fds=(lock.fileno(),))
            output = proc.stdout + proc.stderr
            keep_parse(self.paths.dbt_dir / "target", parse)
            # what this run published: the manifest it wrote (not its log)
            snap = published_snapshot(self.paths, self.paths.dbt_dir / "target") if proc.returncode == 0 else None
            index = None
            if snap is not None:
                index, note = update_index(self.paths, snap)
                output += note
                record_build(self.paths, before, snap, seeds=seeds)
                record_covered(self.paths, snap, landed)
            prune_snapshots(self.paths, SNAPSHOTS_KEPT)
        if proc.returncode != 0:
            raise BuildFailed(f"dbt {command} failed (exit {proc.returncode})", output)
        return BuildResult(str(snap) if snap is not None else None, plain_text(output), time.monotonic() - started, index)

    # --- recalling -----------------------------------------------------------------------
    def recall_many(
        self,
        queries: Sequence[Query],
        *,
        user_id: str,
        top_k: int | None = None,
        min_sim: float | None = None,
        kinds: Sequence[str] | None = None,
        record_access: bool = False,
        agent_id: str | None = None,
        session_id: str | None = None,
        vectors: Sequence[Any] | None = None,
    ) -> list[list[RecalledMemory]]:
        """Recall for several intents (texts or precomputed vectors) of one user in one statement.

        ``min_sim`` applies to raw cosine similarity; ranking is by the fused vector and
        lexical relevance weighted by strength (var fusion_method, docs/recall.md).
        ``agent_id`` / ``session_id`` narrow the user scope to memories with a source message
        from that agent / session. An unknown user gets empty lists. A recall is a look: returned
        memories are logged as accesses (they reinforce at the next build) only when
        ``record_access`` is true (``prompt`` sets it by default: docs/recall.md "Access").
        ``vectors`` (aligned with ``queries``) are embeddings of the query texts computed by
        the caller with the store's model (the server embeds outside its recall lane)."""
        self._complete_pending_forget()
        k, ms, user_id, agent_id, session_id = recall_arguments(
            queries, self._reader.settings, user_id=user_id, top_k=top_k, min_sim=min_sim, kinds=kinds,
            agent_id=agent_id, session_id=session_id)
        texts = [q if isinstance(q, str) else None for q in queries]
        vecs = query_vectors(queries, self._reader.settings, vectors)
        results = self._tail_recall(user_id, vecs, k, ms, kinds, texts, agent_id, session_id)
        if results is None:
            results = self._reader.run(user_id, vecs, k, ms, kinds, texts, agent_id, session_id)
        if record_access:
            self._record_access(user_id, results)
        return results

    def _tail_recall(self, user_id: str, vectors: list[list[float]], k: int, ms: float, kinds: Sequence[str] | None,
                     texts: list[str | None], agent_id: str | None,
                     session_id: str | None) -> list[list[RecalledMemory]] | None:
        """The answer over the snapshot and the hot tail when the user has tail memories, else None
        (the snapshot alone answers). Without a tail worker the tail is synced first; with one the
        current state answers (docs/serving.md "Hot tail"). A tail that fails warns and leaves the
        snapshot's answer."""
        if self._tail is None:
            return None
        try:
            if not self._tail.running:
                self._tail.sync()
            state = self._tail.current(self._reader.snapshot_path, wait=TAIL_WAIT_SECONDS)
            if state is None or user_id not in state.users:
                return None
            if agent_id is None and session_id is None:  # the index holds no provenance
                found = self._reader.run_with_tail(user_id, vectors, k, ms, kinds, texts, state.users[user_id])
                if found is not None:
                    return found
                if self._reader.ivf_user(user_id):
                    return None  # the compiled statement costs seconds at that size: the snapshot answers
            return self._tail.recall(self._reader, state, user_id, vectors, k, ms, kinds, texts, agent_id, session_id)
        except (duckdb.Error, OSError, pa.ArrowException, StoreNotBuilt) as exc:
            warnings.warn(f"the hot tail did not answer (recall served from the snapshot only): {exc}",
                          RuntimeWarning, stacklevel=3)
            self._tail.reset()
            return None

    def start_tail_worker(self) -> None:
        """Keep the hot tail in a background thread (a long-lived server): new messages are read,
        extracted and embedded outside the recall path, in batches; recall reads the current tail
        and never waits for that work (docs/serving.md "Hot tail"). No-op with ``hot_tail=False``."""
        if self._tail is not None:
            self._tail.start_worker()

    def _complete_pending_forget(self) -> None:
        """An interrupted forget is completed by the next reader that can take the build lock at
        once (a running build or forget completes it otherwise); until then readers serve none of
        its ids (SnapshotReader.run)."""
        if not self.paths.forget_journal.exists():
            return
        try:
            complete_pending_forget(self.paths, lock="try")
        except (StorageFailure, StoreBusy) as exc:
            warnings.warn(f"an interrupted forget could not be completed yet: {exc}", RuntimeWarning, stacklevel=3)

    def similarity_distribution(self, queries: Sequence[Query], *, user_id: str) -> list[float]:
        """Cosine similarities of ``queries`` against every current memory of ``user_id``, for
        choosing ``min_sim`` at a quantile (see ``agent-memory similarity``)."""
        user_id = scope_id(user_id, "user_id", required=True)  # type: ignore[assignment]
        if isinstance(queries, (str, np.ndarray)) or not isinstance(queries, Sequence) or not queries:
            raise InvalidQuery("queries must be a non-empty list of query texts or vectors")
        return [s for group in self._reader.similarities(user_id, query_vectors(queries, self._reader.settings)) for s in group]

    def _record_access(self, user_id: str, results: list[list[RecalledMemory]]) -> None:
        """Land the recalled memories as access events. A store that cannot take the write
        (disk full, read-only) loses the event, not the recall: a warning says so."""
        if not any(results):
            return
        try:
            with file_lock(self.paths.write_lock, exclusive=False):
                now = utc_now_iso()
                query_id = uuid.uuid4().hex
                seen: set[str] = set()
                events = []
                for group in results:
                    for m in group:
                        if m.memory_id in seen:
                            continue
                        seen.add(m.memory_id)
                        events.append({"event_id": uuid.uuid4().hex, "memory_id": m.memory_id, "user_id": user_id,
                                       "query_id": query_id, "accessed_at": now})
                write_landing_file(self.paths.access, events)
        except (OSError, StorageFailure) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            warnings.warn(f"recall answered, but its access event was not recorded: {reason}", AccessNotRecorded,
                          stacklevel=3)

    # --- forgetting ----------------------------------------------------------------------
    def forget(self, *, user_id: str | None = None, memory_id: str | None = None,
               actor: str | None = None) -> ForgetReport:
        """Forget a whole user (``user_id``) or one memory (``memory_id``; with ``user_id`` too,
        the memory must belong to that user) everywhere, and append an audit record. See
        ``docs/data_protection.md``. Ids follow the id rule (recall_shim/write/ids.py): an id that
        is not a string raises InvalidId; one that breaks the rule is forgotten as given (rows
        landed before the rule may carry it)."""
        user_id = forget_id(user_id, "user_id")
        unbuilt = None
        if self._tail is not None and isinstance(memory_id, str):
            try:  # a memory of the hot tail: its messages are only in the landing files yet
                self._tail.sync()
                unbuilt = self._tail.unbuilt_memory(memory_id)
            except (StoreNotBuilt, duckdb.Error, OSError):
                unbuilt = None
            if unbuilt is not None and user_id is not None and unbuilt[0] != user_id:
                unbuilt = None
        report = forget(self.paths, user_id=user_id, memory_id=memory_id, actor=actor, unbuilt=unbuilt)
        if self._tail is not None:
            self._tail.reset()  # re-read from the rewritten landing files and the new tombstones
        return report

    @property
    def snapshot_path(self) -> Path | None:
        return self._reader.snapshot_path

    def close(self) -> None:
        if self._tail is not None:
            self._tail.close()
        self._reader.close()
