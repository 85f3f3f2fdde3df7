"""The operations the HTTP server and the MCP server expose, over one long-lived MemoryStore.

JSON-shaped values in, JSON-shaped dicts out. The store (and so the embedding model and the
compiled recall statement of the newest snapshot) is loaded once per process. Reads run against
published serving snapshots and writes land files, so a server never holds the warehouse and
never blocks ``agent-memory build``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

from recall_shim.interfaces.caller_vars import caller_vars
from recall_shim.common.embedding import embed_texts
from recall_shim.errors import (AgentMemoryError, BuildFailed, BuildInProgress, InvalidInput, InvalidQuery, StoreNotBuilt,
                      TooLarge)
from recall_shim.interfaces.lane import FairLane
from recall_shim.recall.prompt import format_prompt
from recall_shim.interfaces.requests import MAX_INGEST_ROWS, MAX_QUERIES, ONE_QUERY, Operation, Request, arguments
from recall_shim.serving.reader import RecalledMemory
from recall_shim.targets import open_store

log = logging.getLogger("agent_memory.server")

# The cost of one recall request is bounded: each text by the store's recall_max_query_chars
# (2,000 by default), all its texts together by this (embedding cost grows with length).
MAX_QUERY_CHARS_PER_REQUEST = 8_000
# Texts longer than this embed one at a time in the heavy lane, so two heavy callers take turns
# and a light caller's short query never waits behind them.
HEAVY_QUERY_CHARS = 256
# The recall lane (one snapshot connection) is taken per this many queries of a request.
RECALL_CHUNK = 4
DEFAULT_ACTOR = "api"  # the audit actor of a forget whose caller names none


class OperationUnavailable(AgentMemoryError):
    """The installed store has no such operation (for example ``forget`` before it exists)."""


def _memories(results: Sequence[RecalledMemory]) -> list[dict[str, Any]]:
    return [m.as_dict() for m in results]


def _query_list(queries: Any) -> list[Any]:
    """A request's queries: a non-empty list of at most MAX_QUERIES texts or vectors, with at
    most MAX_QUERY_CHARS_PER_REQUEST characters of text in all."""
    if isinstance(queries, str) or not isinstance(queries, Sequence) or not queries:
        raise InvalidQuery("queries must be a non-empty list of query texts or vectors")
    if len(queries) > MAX_QUERIES:
        raise InvalidQuery(f"at most {MAX_QUERIES} queries per request, got {len(queries)}")
    chars = sum(len(q) for q in queries if isinstance(q, str))
    if chars > MAX_QUERY_CHARS_PER_REQUEST:
        raise TooLarge(f"the queries have {chars} characters in all; at most {MAX_QUERY_CHARS_PER_REQUEST} "
                       "per request (send fewer or shorter queries)")
    return list(queries)


def _embeddable(text: str, max_chars: int) -> bool:
    """Whether the store would embed ``text`` (else it raises its own clear error for it)."""
    if not text.strip() or len(text) > max_chars:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
    DuckDB file ``db`` or, with AGENT_MEMORY_TARGET=postgres, the PostgreSQL store (open_store).

    Recall: query texts are embedded outside the recall lane (the model is reentrant; long texts
    take turns in a heavy lane), then the lane (one snapshot connection) is taken first come,
    first served per RECALL_CHUNK queries, so a heavy request cannot hold it for long. Builds:
    one at a time per process; a second one is refused (BuildInProgress), never queued."""

    def __init__(self, db: str | os.PathLike[str] | None = None) -> None:
        self.store = open_store(db)
        start_tail_worker = getattr(self.store, "start_tail_worker", None)
        if callable(start_tail_worker):  # the hot tail's upkeep outside the recall lane (docs/serving.md)
            start_tail_worker()
        self._lane = FairLane()
        self._heavy_lane = FairLane()
        self._build_lock = threading.Lock()
        self._state: dict[str, Any] = {"ready": False}

    # --- lifecycle -------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Load the embedding model and open the newest snapshot now, not on the first request."""
        with self._lane:
            try:
                s = self.store._reader.settings
            except StoreNotBuilt:
                return
        embed_texts(s.embedding_model, s.embedding_query_form, ["warm up"])

    def close(self) -> None:
        with self._lane:
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
    def call(self, op: Operation, request: Request) -> dict[str, Any]:
        """Run one parsed request (recall_shim/interfaces/requests.py) of ``op``: HTTP and MCP call every
        operation through here, so both pass the same arguments to the same method."""
        return getattr(self, op.name)(**arguments(request))  # type: ignore[no-any-return]

    def health(self, *, detail: bool = True) -> dict[str, Any]:
        """Status and readiness; with ``detail`` also the snapshot name, model and defaults (never
        a path). Never waits: while the recall lane is busy it answers from the last look."""
        if self._lane.acquire(blocking=False):
            try:
                self._state = self._look()
            finally:
                self._lane.release()
        state = dict(self._state)
        if not detail:
            return {"status": "ok", "ready": state["ready"]}
        return {"status": "ok", **state, "forget": self.can_forget}

    def _look(self) -> dict[str, Any]:
        try:
            s = self.store._reader.settings
        except StoreNotBuilt:
            return {"ready": False, "snapshot": None, "detail": "no snapshot is published yet: run `agent-memory build`"}
        snap = self.store.snapshot_path
        return {"ready": True, "snapshot": snap.name if snap else None, "embedding_model": s.embedding_model,
                "embedding_dim": s.embedding_dim, "default_top_k": s.default_top_k,
                "default_min_sim": s.default_min_sim, "max_top_k": s.max_top_k}

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
                "note": "durable now; recallable within seconds, before any build (hot tail)"}

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
        **options: Any,
    ) -> dict[str, Any]:
        if (query is None) == (vector is None):
            raise InvalidQuery(ONE_QUERY)
        q: Any = query if query is not None else list(vector or [])
        out = self.recall_many(user_id, [q], **options)
        return {"results": out["results"][0], "snapshot": out["snapshot"]}

    def recall_many(
        self,
        user_id: str,
        queries: Sequence[str | Sequence[float]],
        *,
        top_k: int | None = None,
        min_sim: float | None = None,
        kinds: Sequence[str] | None = None,
        record_access: bool = False,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        groups, snap = self._recall(user_id, _query_list(queries), dict(
            top_k=top_k, min_sim=min_sim, kinds=kinds, record_access=record_access,
            agent_id=agent_id, session_id=session_id))
        return {"results": [_memories(g) for g in groups], "snapshot": snap}

    def _recall(self, user_id: str, queries: list[Any],
                options: dict[str, Any]) -> tuple[list[list[RecalledMemory]], str | None]:
        with self._lane:
            s = self.store._reader.settings
        given = self._embed(s.embedding_model, s.embedding_query_form, s.max_query_chars, queries)
        # a text the store would refuse: one call, so the store raises its own error before any work
        step = RECALL_CHUNK if given is not None or not any(isinstance(q, str) for q in queries) else len(queries)
        groups: list[list[RecalledMemory]] = []
        snap = None
        for start in range(0, len(queries), step):
            part = queries[start:start + step]
            with self._lane:
                groups += self.store.recall_many(part, user_id=user_id, **options,
                                                 vectors=None if given is None else given[start:start + step])
                path = self.store.snapshot_path
            snap = path.name if path else None
        return groups, snap

    def _embed(self, model: str, form: str, max_chars: int, queries: list[Any]) -> list[Any] | None:
        """Embeddings of the query texts (None at vector queries), computed outside the recall
        lane; None when there is no text or a text the store would refuse."""
        texts = [(i, q) for i, q in enumerate(queries) if isinstance(q, str)]
        if not texts or not all(_embeddable(t, max_chars) for _, t in texts):
            return None
        out: list[Any] = [None] * len(queries)
        light = [(i, t) for i, t in texts if len(t) <= HEAVY_QUERY_CHARS]
        if light:
            for (i, _), v in zip(light, embed_texts(model, form, [t for _, t in light])):
                out[i] = v
        for i, t in texts:
            if len(t) > HEAVY_QUERY_CHARS:
                with self._heavy_lane:
                    out[i] = embed_texts(model, form, [t])[0]
        return out

    def prompt(
        self,
        user_id: str,
        queries: Sequence[str | Sequence[float]],
        *,
        budget_chars: int = 1200,
        **options: Any,
    ) -> dict[str, Any]:
        queries = _query_list(queries)
        if isinstance(budget_chars, bool) or not isinstance(budget_chars, int) or budget_chars < 1:
            raise InvalidQuery(f"budget_chars must be a positive integer, got {budget_chars!r}")
        options.setdefault("record_access", True)  # a prompt is a use (docs/recall.md "Access")
        groups, _ = self._recall(user_id, queries, options)
        return {"prompt": format_prompt([m for g in groups for m in g], budget_chars=budget_chars)}

    def forget(self, user_id: str | None = None, memory_id: str | None = None,
               actor: str | None = None) -> dict[str, Any]:
        fn = getattr(self.store, "forget", None)
        if not callable(fn):
            raise OperationUnavailable("forget is not available in this version of recall_shim")
        if not user_id and not memory_id:
            raise InvalidInput("give user_id, memory_id or both")
        result = fn(user_id=user_id, memory_id=memory_id, actor=actor or DEFAULT_ACTOR)
        return {"forgotten": _jsonable(result)}

    def build(self, *, full_refresh: bool = False, vars: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Run a build from the server process. Only allow-listed vars (recall_shim/interfaces/caller_vars.py);
        one build at a time (a second call raises BuildInProgress at once); a failure is logged
        in full here and raised with a short message (no dbt output, which can hold data)."""
        checked = caller_vars(vars)
        if not isinstance(full_refresh, bool):
            raise InvalidInput("full_refresh must be true or false")
        if not self._build_lock.acquire(blocking=False):
            raise BuildInProgress("a build is running in this server already; try again when it has finished")
        try:
            res = self.store.build(full_refresh=full_refresh, vars=checked)
        except BuildFailed as exc:
            log.error("build failed: %s\n%s", exc, exc.output[-20000:])
            raise BuildFailed(f"{exc}; the details are in the server's log") from None
        finally:
            self._build_lock.release()
        return {"snapshot": Path(res.snapshot).name if res.snapshot else None, "seconds": round(res.seconds, 3),
                "skipped": res.skipped}
