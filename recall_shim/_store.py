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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from ._embedding import embed_texts
from ._errors import AccessNotRecorded, BuildFailed, InvalidId, InvalidInput, InvalidQuery, StorageFailure, StoreBusy
from ._forget import ForgetReport, complete_pending_forget, forget
from ._forget_journal import storage_errors
from ._door import admit, admit_strict
from ._ids import forget_id, normalise_id
from ._landing import read_input_file, utc_now_iso, write_landing_file
from ._limits import door_limits, memory_kinds
from ._locks import file_lock
from ._paths import PROJECT_ENV, StorePaths, project_dir  # noqa: F401 (PROJECT_ENV: re-exported)
from ._prompt import format_prompt
from ._serving import RecalledMemory, RecallSettings, SnapshotReader, prune_snapshots, update_index

DEFAULT_DB_ENV = "AGENT_MEMORY_DB"
SNAPSHOTS_KEPT = 3

Query = str | Sequence[float] | np.ndarray


def scope_id(value: Any, name: str, *, required: bool) -> str | None:
    """A user/agent/session scope under the one id rule (recall_shim/_ids.py), NFC-normalised
    like every stored id, or InvalidId (an InvalidQuery): an id that no stored row can have is
    refused instead of silently matching nothing or another user. None when not ``required``."""
    if value is None:
        if required:
            raise InvalidId(f"{name} is required: recall is always scoped to one user", f"invalid_{name}")
        return None
    return normalise_id(value, name)


class RecallArgs(NamedTuple):
    top_k: int
    min_sim: float
    user_id: str
    agent_id: str | None
    session_id: str | None


def recall_arguments(queries: Any, settings: RecallSettings, *, user_id: Any, top_k: Any, min_sim: Any,
                     kinds: Any, agent_id: Any, session_id: Any) -> RecallArgs:
    """Check a recall's arguments against a store's settings (shared by every store type):
    returns them with the defaults applied and the ids normalised, or raises InvalidQuery."""
    user = scope_id(user_id, "user_id", required=True)
    agent = scope_id(agent_id, "agent_id", required=False)
    session = scope_id(session_id, "session_id", required=False)
    if isinstance(queries, (str, np.ndarray)) or not isinstance(queries, Sequence):
        raise InvalidQuery("queries must be a list of query texts or vectors")
    k = settings.default_top_k if top_k is None else top_k
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= settings.max_top_k:
        raise InvalidQuery(f"top_k must be an integer from 1 to {settings.max_top_k}, got {k!r}")
    ms = settings.default_min_sim if min_sim is None else min_sim
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not -1.0 <= float(ms) <= 1.0:
        raise InvalidQuery(f"min_sim must be a number from -1 to 1, got {ms!r}")
    if kinds is not None:
        if isinstance(kinds, str) or not all(isinstance(x, str) and x for x in kinds):
            raise InvalidQuery("kinds must be a list of kind names")
        for x in kinds:
            scope_id(x, "kind", required=True)
        unknown = sorted(set(kinds) - set(memory_kinds()))
        if unknown:
            raise InvalidQuery(f"unknown kind{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                               f"the kinds are {', '.join(memory_kinds())}")
    return RecallArgs(k, float(ms), user, agent, session)  # type: ignore[arg-type]


def default_db() -> Path:
    env = os.environ.get(DEFAULT_DB_ENV)
    if env:
        return Path(env)
    return project_dir() / "data" / "agent_memory.duckdb"


@dataclass(frozen=True)
class IngestReport:
    """What ``ingest`` did with one file. ``rows`` counts every row landed (what the next build
    puts in session_messages or session_log_rejects); ``refused`` counts, by reason, the rows
    among them the door refused (they land only as rejects, their content cut to the limit)."""

    file: str
    rows: int
    landing_file: str | None
    skipped: bool = False
    refused: Mapping[str, int] = field(default_factory=dict)

    @property
    def accepted(self) -> int:
        """Rows that passed the door (staging may still reject some: session_log_rejects)."""
        return self.rows - sum(self.refused.values())


def message_row(user_id: Any, content: Any, *, role: Any = "user", session_id: Any = "default",
                msg_seq: Any = None, ts: Any = None, message_id: Any = None, agent_id: Any = None) -> dict[str, Any]:
    """The session-log row of one ``remember`` call, with its defaults (shared by both stores)."""
    return {"user_id": user_id, "session_id": session_id, "agent_id": agent_id,
            "msg_seq": msg_seq if msg_seq is not None else time.time_ns() // 1000, "role": role,
            "content": content, "ts": ts or utc_now_iso(),
            "message_id": f"msg_{uuid.uuid4().hex}" if message_id is None else message_id}


def refusals(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Door reasons -> counts over landing records."""
    out: dict[str, int] = {}
    for r in records:
        if r.get("door_reason"):
            out[r["door_reason"]] = out.get(r["door_reason"], 0) + 1
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class BuildResult:
    snapshot: str | None
    output: str
    seconds: float
    index: dict[str, Any] | None = None  # what the serving index update did (None: no index)


class MemoryStore:
    """A memory store named by its DuckDB path (see ``docs/architecture.md``).

    Writes (``remember``, ``ingest``, access events) land as immutable files and never touch the
    DuckDB file; ``build`` runs ``dbt build`` and publishes a snapshot; ``recall`` reads the
    newest published snapshot read-only.
    """

    def __init__(self, db: str | os.PathLike[str] | None = None) -> None:
        self.paths = StorePaths.of(db if db is not None else default_db())
        try:
            self.paths.ensure()
        except OSError as exc:  # a read-only store still serves reads (its folders exist)
            warnings.warn(f"store {self.paths.db} is not writable: {exc.strerror or exc}", AccessNotRecorded,
                          stacklevel=2)
        self._reader = SnapshotReader(self.paths)

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
        Raises InvalidId (an id breaks the id rule, recall_shim/_ids.py), ContentTooLong (more than
        var max_content_chars characters), InvalidInput (a wrong type) or StorageFailure (the disk
        refused the write); nothing lands then."""
        row = message_row(user_id, content, role=role, session_id=session_id, msg_seq=msg_seq, ts=ts,
                          message_id=message_id, agent_id=agent_id)
        record = admit_strict(row, utc_now_iso(), door_limits())
        with storage_errors("the message was not stored"), file_lock(self.paths.write_lock, exclusive=False):
            write_landing_file(self.paths.messages, [record])
        return str(record["message_id"])

    def remember_many(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append many session-log rows (dicts with the session-log columns) as one landing file,
        all or none: a row the door refuses raises (like ``remember``, naming the row) and nothing
        lands. Returns how many rows landed."""
        landed_at, limits = utc_now_iso(), door_limits()
        records = [admit_strict(r, landed_at, limits, f"row {i}: ", i) for i, r in enumerate(rows)]
        with storage_errors("the rows were not stored"), file_lock(self.paths.write_lock, exclusive=False):
            write_landing_file(self.paths.messages, records)
        return len(records)

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
            with file_lock(self.paths.write_lock, exclusive=False):
                landing = write_landing_file(self.paths.messages, records)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps({"file": str(p), "rows": len(records), "at": landed_at}))
        return IngestReport(str(p), len(records), str(landing) if landing else None,
                            refused=refusals(records))

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
            args += ["--vars", json.dumps(dict(vars))]
        if select:
            args += ["--select", select]
        env = dict(os.environ)
        env.update({
            DEFAULT_DB_ENV: str(self.paths.db),
            "DBT_TARGET_PATH": str(self.paths.dbt_dir / "target"),
            "DBT_LOG_PATH": str(self.paths.dbt_dir / "logs"),
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
            "OMP_WAIT_POLICY": env.get("OMP_WAIT_POLICY", "passive"),
        })
        started = time.monotonic()
        with open(self.paths.build_lock, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            complete_pending_forget(self.paths, lock="held")  # before dbt reads the warehouse
            # dbt inherits the locked descriptor: if this process is killed (kill -9), the orphaned
            # dbt keeps holding the lock until it exits, so the next build waits instead of colliding
            # with it on the warehouse file.
            proc = subprocess.run(args, cwd=proj, env=env, capture_output=True, text=True,
                                  pass_fds=(lock.fileno(),))
            output = proc.stdout + proc.stderr
            snaps = [line.split("publishing serving snapshot ", 1)[1].strip()
                     for line in output.splitlines() if "publishing serving snapshot " in line]
            index = None
            if proc.returncode == 0 and snaps:
                index, note = update_index(self.paths, Path(snaps[-1]))
                output += note
            prune_snapshots(self.paths, SNAPSHOTS_KEPT)
        if proc.returncode != 0:
            raise BuildFailed(f"dbt {command} failed (exit {proc.returncode})", output)
        return BuildResult(snaps[-1] if snaps else None, output, time.monotonic() - started, index)

    # --- recalling -----------------------------------------------------------------------
    def _vectors(self, queries: Sequence[Query], given: Sequence[Any] | None = None) -> list[list[float]]:
        """The queries' vectors: texts validated and embedded (or taken from ``given``, aligned
        with ``queries``, when the caller embedded them already), vectors checked."""
        s = self._reader.settings
        texts = [(i, q) for i, q in enumerate(queries) if isinstance(q, str)]
        for _, t in texts:
            if not t.strip():
                raise InvalidQuery("query text is empty")
            if len(t) > s.max_query_chars:
                raise InvalidQuery(f"query text has {len(t)} characters; the limit is {s.max_query_chars} (var recall_max_query_chars)")
            try:
                t.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidQuery("query text is not valid Unicode (lone surrogate)") from None
        vecs: list[list[float] | None] = [None] * len(queries)
        if given is not None and len(given) != len(queries):
            raise InvalidQuery(f"{len(given)} precomputed vectors for {len(queries)} queries")
        if texts:
            embedded = ([given[i] for i, _ in texts] if given is not None
                        else embed_texts(s.embedding_model, s.embedding_query_form, [t for _, t in texts]))
            for (i, _), v in zip(texts, embedded):
                vecs[i] = self._reader.check_vector(v)
        for i, q in enumerate(queries):
            if vecs[i] is None:
                vecs[i] = self._reader.check_vector(q)  # type: ignore[arg-type]
        return [v for v in vecs if v is not None]

    def recall_many(
        self,
        queries: Sequence[Query],
        *,
        user_id: str,
        top_k: int | None = None,
        min_sim: float | None = None,
        kinds: Sequence[str] | None = None,
        record_access: bool = True,
        agent_id: str | None = None,
        session_id: str | None = None,
        vectors: Sequence[Any] | None = None,
    ) -> list[list[RecalledMemory]]:
        """Recall for several intents (texts or precomputed vectors) of one user in one statement.

        ``min_sim`` applies to raw cosine similarity; ranking is by the fused vector and
        lexical relevance weighted by strength (var fusion_method, docs/recall.md).
        ``agent_id`` / ``session_id`` narrow the user scope to memories with a source message
        from that agent / session. An unknown user gets empty lists. Returned memories are logged
        as accesses (they reinforce at the next build) unless ``record_access`` is false.
        ``vectors`` (aligned with ``queries``) are embeddings of the query texts computed by
        the caller with the store's model (the server embeds outside its recall lane)."""
        self._complete_pending_forget()
        k, ms, user_id, agent_id, session_id = recall_arguments(
            queries, self._reader.settings, user_id=user_id, top_k=top_k, min_sim=min_sim, kinds=kinds,
            agent_id=agent_id, session_id=session_id)
        texts = [q if isinstance(q, str) else None for q in queries]
        results = self._reader.run(user_id, self._vectors(queries, vectors), k, ms, kinds, texts,
                                   agent_id, session_id)
        if record_access:
            self._record_access(user_id, results)
        return results

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
        return [s for group in self._reader.similarities(user_id, self._vectors(queries)) for s in group]

    def recall(self, query: Query, *, user_id: str, **kwargs: Any) -> list[RecalledMemory]:
        """Recall the best memories of ``user_id`` for one query text or vector."""
        return self.recall_many([query], user_id=user_id, **kwargs)[0]

    def prompt(self, queries: Sequence[Query], *, user_id: str, budget_chars: int = 1200, **kwargs: Any) -> str:
        """Recall for ``queries`` and format the memories as a system-prompt block."""
        results = self.recall_many(queries, user_id=user_id, **kwargs)
        return format_prompt([m for group in results for m in group], budget_chars=budget_chars)

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
        ``docs/data_protection.md``. Ids follow the id rule (recall_shim/_ids.py): an id that
        is not a string raises InvalidId; one that breaks the rule is forgotten as given (rows
        landed before the rule may carry it)."""
        user_id = forget_id(user_id, "user_id")
        return forget(self.paths, user_id=user_id, memory_id=memory_id, actor=actor)

    @property
    def snapshot_path(self) -> Path | None:
        return self._reader.snapshot_path

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
