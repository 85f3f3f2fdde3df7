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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ._embedding import embed_texts
from ._errors import BuildFailed, InvalidInput, InvalidQuery
from ._forget import ForgetReport, forget
from ._landing import message_record, read_input_file, utc_now_iso, write_landing_file
from ._locks import file_lock
from ._paths import StorePaths
from ._prompt import format_prompt
from ._serving import RecalledMemory, RecallSettings, SnapshotReader, prune_snapshots, update_index

DEFAULT_DB_ENV = "AGENT_MEMORY_DB"
PROJECT_ENV = "AGENT_MEMORY_PROJECT"
SNAPSHOTS_KEPT = 3

Query = str | Sequence[float] | np.ndarray


def _scope_id(value: Any, name: str, *, required: bool) -> str | None:
    """A user/agent/session scope as given, or a clear error: ids are compared exactly, so one
    that no stored row can have (blank, surrounding whitespace, control characters, not valid
    Unicode) is refused instead of silently matching nothing or another user."""
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidQuery(f"{name} is required: recall is always scoped to one user" if name == "user_id"
                           else f"{name} must be a non-empty string or None")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidQuery(f"{name} is not valid Unicode (lone surrogate)") from None
    if value != value.strip() or any(ord(c) < 32 or 127 <= ord(c) <= 159 for c in value):
        raise InvalidQuery(f"{name} {value!r} has surrounding whitespace or control characters; no stored row can match it")
    return value


def recall_arguments(queries: Any, settings: RecallSettings, *, user_id: Any, top_k: Any, min_sim: Any,
                     kinds: Any, agent_id: Any, session_id: Any) -> tuple[int, float]:
    """Check a recall's arguments against a store's settings (shared by every store type):
    returns (top_k, min_sim) with the defaults applied, or raises InvalidQuery."""
    _scope_id(user_id, "user_id", required=True)
    _scope_id(agent_id, "agent_id", required=False)
    _scope_id(session_id, "session_id", required=False)
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
            _scope_id(x, "kind", required=True)
    return k, float(ms)


def project_dir() -> Path:
    """The dbt project: $AGENT_MEMORY_PROJECT, else the checkout this package sits in."""
    env = os.environ.get(PROJECT_ENV)
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[1])
    for c in candidates:
        if (c / "dbt_project.yml").is_file():
            return c.resolve()
    raise InvalidInput(
        "cannot find the dbt project (dbt_project.yml); set AGENT_MEMORY_PROJECT to the checkout"
    )


def default_db() -> Path:
    env = os.environ.get(DEFAULT_DB_ENV)
    if env:
        return Path(env)
    return project_dir() / "data" / "agent_memory.duckdb"


@dataclass(frozen=True)
class IngestReport:
    file: str
    rows: int
    landing_file: str | None
    skipped: bool = False


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
        self.paths = StorePaths.of(db if db is not None else default_db()).ensure()
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
        """Append one message to the session log (durable when this returns); returns its id."""
        message_id = message_id or f"msg_{uuid.uuid4().hex}"
        with file_lock(self.paths.write_lock, exclusive=False):
            row = {
                "user_id": user_id, "session_id": session_id, "agent_id": agent_id,
                "msg_seq": msg_seq if msg_seq is not None else time.time_ns() // 1000,
                "role": role, "content": content, "ts": ts or utc_now_iso(), "message_id": message_id,
            }
            write_landing_file(self.paths.messages, [message_record(row, utc_now_iso())])
        return message_id

    def remember_many(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append many session-log rows (dicts with the session-log columns) as one landing file."""
        with file_lock(self.paths.write_lock, exclusive=False):
            landed_at = utc_now_iso()
            records = [message_record(r, landed_at, i) for i, r in enumerate(rows)]
            write_landing_file(self.paths.messages, records)
        return len(records)

    def ingest(self, path: str | os.PathLike[str], *, force: bool = False) -> IngestReport:
        """Bulk-load a CSV, JSONL or Parquet file of session-log rows. A file whose bytes were
        ingested into this store before is skipped unless ``force``."""
        p = Path(path)
        if not p.is_file():
            raise InvalidInput(f"no such file: {p}")
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        marker = self.paths.inbox / "ingested" / digest
        if marker.exists() and not force:
            return IngestReport(str(p), 0, None, skipped=True)
        with file_lock(self.paths.write_lock, exclusive=False):
            landed_at = utc_now_iso()
            records = [message_record(r, landed_at, i) for i, r in enumerate(read_input_file(p))]
            landing = write_landing_file(self.paths.messages, records)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"file": str(p), "rows": len(records), "at": landed_at}))
        return IngestReport(str(p), len(records), str(landing) if landing else None)

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
    def _vectors(self, queries: Sequence[Query]) -> list[list[float]]:
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
        if texts:
            embedded = embed_texts(s.embedding_model, s.embedding_query_form, [t for _, t in texts])
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
    ) -> list[list[RecalledMemory]]:
        """Recall for several intents (texts or precomputed vectors) of one user in one statement.

        ``min_sim`` applies to raw cosine similarity; ranking is by the fused vector and
        lexical relevance weighted by strength (var fusion_method, docs/recall.md).
        ``agent_id`` / ``session_id`` narrow the user scope to memories with a source message
        from that agent / session. An unknown user gets empty lists. Returned memories are logged
        as accesses (they reinforce at the next build) unless ``record_access`` is false."""
        k, ms = recall_arguments(queries, self._reader.settings, user_id=user_id, top_k=top_k,
                                 min_sim=min_sim, kinds=kinds, agent_id=agent_id, session_id=session_id)
        texts = [q if isinstance(q, str) else None for q in queries]
        results = self._reader.run(user_id, self._vectors(queries), k, ms, kinds, texts,
                                   agent_id, session_id)
        if record_access:
            self._record_access(user_id, results)
        return results

    def similarity_distribution(self, queries: Sequence[Query], *, user_id: str) -> list[float]:
        """Cosine similarities of ``queries`` against every current memory of ``user_id``, for
        choosing ``min_sim`` at a quantile (see ``agent-memory similarity``)."""
        user_id = _scope_id(user_id, "user_id", required=True)  # type: ignore[assignment]
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
        if not any(results):
            return
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

    # --- forgetting ----------------------------------------------------------------------
    def forget(self, *, user_id: str | None = None, memory_id: str | None = None,
               actor: str | None = None) -> ForgetReport:
        """Forget a whole user (``user_id``) or one memory (``memory_id``; with ``user_id`` too,
        the memory must belong to that user) everywhere, and append an audit record. See
        ``docs/data_protection.md``."""
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
