"""The operations the HTTP server and the MCP server expose, over one long-lived MemoryStore.

JSON-shaped values in, JSON-shaped dicts out. The store (and so the embedding model and the
compiled recall statement of the newest snapshot) is loaded once per process. Reads run against
published serving snapshots and writes land files, so a server never holds the warehouse and
never blocks ``agent-memory build``.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

from ._errors import AgentMemoryError, InvalidInput, InvalidQuery, StoreNotBuilt
from ._serving import RecalledMemory
from ._targets import open_store

MAX_INGEST_ROWS = 10_000
MAX_QUERIES = 32


class OperationUnavailable(AgentMemoryError):
    """The installed store has no such operation (for example ``forget`` before it exists)."""


def _memories(results: Sequence[RecalledMemory]) -> list[dict[str, Any]]:
    return [m.as_dict() for m in results]


def _query_list(queries: Any) -> list[Any]:
    """A request's queries: a non-empty list of at most MAX_QUERIES texts or vectors."""
    if isinstance(queries, str) or not isinstance(queries, Sequence) or not queries:
        raise InvalidQuery("queries must be a non-empty list of query texts or vectors")
    if len(queries) > MAX_QUERIES:
        raise InvalidQuery(f"at most {MAX_QUERIES} queries per request, got {len(queries)}")
    return list(queries)


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


class MemoryService:
    """One store, shared by every request of a server process (thread-safe). The store is the
    DuckDB file ``db`` or, with AGENT_MEMORY_TARGET=postgres, the PostgreSQL store (open_store)."""

    def __init__(self, db: str | os.PathLike[str] | None = None) -> None:
        self.store = open_store(db)
        # One DuckDB connection to the snapshot and one embedding model: recalls take turns.
        self._read_lock = threading.Lock()
        self._build_lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Load the embedding model and open the newest snapshot now, not on the first request."""
        with self._read_lock:
            try:
                s = self.store._reader.settings
            except StoreNotBuilt:
                return
            from ._embedding import embed_texts

            embed_texts(s.embedding_model, s.embedding_query_form, ["warm up"])

    def close(self) -> None:
        with self._read_lock:
            self.store.close()

    @property
    def location(self) -> str:
        """The DuckDB file, or the PostgreSQL store as a URL without password."""
        paths = getattr(self.store, "paths", None)
        return str(paths.db) if paths is not None else str(getattr(self.store, "location", ""))

    @property
    def can_forget(self) -> bool:
        return callable(getattr(self.store, "forget", None))

    # --- operations ------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": "ok", "db": self.location, "ready": False,
                               "snapshot": None, "forget": self.can_forget}
        with self._read_lock:
            try:
                s = self.store._reader.settings
            except StoreNotBuilt as exc:
                out["detail"] = str(exc)
                return out
            snap = self.store.snapshot_path
        out.update(ready=True, snapshot=snap.name if snap else None, embedding_model=s.embedding_model,
                   embedding_dim=s.embedding_dim, default_top_k=s.default_top_k,
                   default_min_sim=s.default_min_sim, max_top_k=s.max_top_k)
        return out

    def remember(self, user_id: str, content: str, **fields: Any) -> dict[str, Any]:
        if not isinstance(user_id, str) or not user_id.strip():
            raise InvalidInput("user_id is required")
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput("content is empty")
        known = {"role", "session_id", "msg_seq", "ts", "message_id", "agent_id"}
        unknown = set(fields) - known
        if unknown:
            raise InvalidInput(f"unknown fields: {sorted(unknown)}")
        kwargs = {k: v for k, v in fields.items() if v is not None}
        message_id = self.store.remember(user_id, content, **kwargs)
        return {"message_id": message_id, "landed": True,
                "note": "durable now; recallable after the next build"}

    def ingest(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or not rows:
            raise InvalidInput("rows must be a non-empty list of session-log objects")
        if len(rows) > MAX_INGEST_ROWS:
            raise InvalidInput(f"at most {MAX_INGEST_ROWS} rows per request, got {len(rows)}")
        for i, r in enumerate(rows):
            if not isinstance(r, Mapping):
                raise InvalidInput(f"row {i} is not an object")
        n = self.store.remember_many(rows)
        return {"rows": n, "landed": True,
                "note": "rows are validated at the next build; rejects go to session_log_rejects"}

    def recall(
        self,
        user_id: str,
        query: str | None = None,
        vector: Sequence[float] | None = None,
        *,
        top_k: int | None = None,
        min_sim: float | None = None,
        kinds: Sequence[str] | None = None,
        record_access: bool = True,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        if (query is None) == (vector is None):
            raise InvalidQuery("give exactly one of query (text) or vector")
        q: Any = query if query is not None else list(vector or [])
        out = self.recall_many(user_id, [q], top_k=top_k, min_sim=min_sim, kinds=kinds,
                               record_access=record_access, agent_id=agent_id, session_id=session_id)
        return {"results": out["results"][0], "snapshot": out["snapshot"]}

    def recall_many(
        self,
        user_id: str,
        queries: Sequence[str | Sequence[float]],
        *,
        top_k: int | None = None,
        min_sim: float | None = None,
        kinds: Sequence[str] | None = None,
        record_access: bool = True,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        with self._read_lock:
            groups = self.store.recall_many(_query_list(queries), user_id=user_id, top_k=top_k, min_sim=min_sim,
                                            kinds=kinds, record_access=record_access,
                                            agent_id=agent_id, session_id=session_id)
            snap = self.store.snapshot_path
        return {"results": [_memories(g) for g in groups], "snapshot": snap.name if snap else None}

    def prompt(
        self,
        user_id: str,
        queries: Sequence[str | Sequence[float]],
        *,
        budget_chars: int = 1200,
        top_k: int | None = None,
        min_sim: float | None = None,
        kinds: Sequence[str] | None = None,
        record_access: bool = True,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        queries = _query_list(queries)
        if isinstance(budget_chars, bool) or not isinstance(budget_chars, int) or budget_chars < 1:
            raise InvalidQuery(f"budget_chars must be a positive integer, got {budget_chars!r}")
        with self._read_lock:
            text = self.store.prompt(queries, user_id=user_id, budget_chars=budget_chars, top_k=top_k,
                                     min_sim=min_sim, kinds=kinds, record_access=record_access,
                                     agent_id=agent_id, session_id=session_id)
        return {"prompt": text}

    def forget(self, user_id: str | None = None, memory_id: str | None = None,
               actor: str = "api") -> dict[str, Any]:
        fn = getattr(self.store, "forget", None)
        if not callable(fn):
            raise OperationUnavailable("forget is not available in this version of recall_shim")
        if not user_id and not memory_id:
            raise InvalidInput("give user_id, memory_id or both")
        result = fn(user_id=user_id, memory_id=memory_id, actor=actor)
        return {"forgotten": _jsonable(result)}

    def build(self, *, full_refresh: bool = False, vars: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Run a build from the server process (builds still serialise on the store's lock file)."""
        if vars is not None and not isinstance(vars, Mapping):
            raise InvalidInput("vars must be an object")
        with self._build_lock:
            res = self.store.build(full_refresh=full_refresh, vars=vars)
        return {"snapshot": Path(res.snapshot).name if res.snapshot else None, "seconds": round(res.seconds, 3)}
