"""HTTP JSON API over :class:`MemoryService` (FastAPI; OpenAPI at ``/openapi.json``, docs at ``/docs``).

    agent-memory serve --db data/agent_memory.duckdb --host 127.0.0.1 --port 8765

Every request passes recall_shim/interfaces/http_guard.py first (Host check, bearer token, body limit and
timeouts). Every error is JSON ``{"error": "..."}``: malformed bodies 422, invalid queries or
input 400, no token 401, too large 413, no published snapshot yet, a build already running or a busy
warehouse 409, a write the disk refused 507, an operation this store lacks 501, a failed build 500 (short message; details in the log).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Literal, Union

from recall_shim.errors import (
    AgentMemoryError,
    BuildFailed,
    BuildInProgress,
    DimensionMismatch,
    InvalidInput,
    InvalidQuery,
    StorageFailure,
    StoreBusy,
    StoreNotBuilt,
    TooLarge,
    UnknownEmbeddingModel,
)
from recall_shim.interfaces.http_guard import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    MAX_BODY_ENV,
    TOKEN_FILE_ENV,
    Guard,
    GuardedH11Protocol,
    GuardMiddleware,
    allowed_hosts,
    default_token_file,
    resolve_token,
)
from recall_shim.interfaces.service import MAX_INGEST_ROWS, MAX_QUERIES, MemoryService, OperationUnavailable

try:
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict, Field
    from starlette.exceptions import HTTPException as StarletteHTTPException
except ImportError as exc:  # pragma: no cover - exercised only without the server extra
    raise ImportError(
        f"the HTTP server needs the 'server' extra: pip install 'agent-memory[server]' ({exc})"
    ) from exc

log = logging.getLogger("agent_memory.server")

STATUS: list[tuple[type[AgentMemoryError], int]] = [
    (TooLarge, 413),
    (StoreNotBuilt, 409),
    (BuildInProgress, 409),
    (StoreBusy, 409),
    (StorageFailure, 507),
    (DimensionMismatch, 400),
    (InvalidQuery, 400),
    (InvalidInput, 400),
    (OperationUnavailable, 501),
    (UnknownEmbeddingModel, 500),
    (BuildFailed, 500),
]

Query = Union[str, list[float]]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RememberBody(_Body):
    user_id: str = Field(min_length=1, description="the user the message belongs to")
    content: str = Field(min_length=1, description="the message text")
    role: str = Field("user", description="user, assistant or system")
    session_id: str = "default"
    msg_seq: int | None = Field(None, description="position in the session (default: a clock value)")
    ts: str | None = Field(None, description="ISO-8601 timestamp (default: now, UTC)")
    message_id: str | None = Field(None, description="message id (default: generated)")
    agent_id: str | None = None


class IngestBody(_Body):
    rows: list[dict[str, Any]] = Field(
        min_length=1, max_length=MAX_INGEST_ROWS,
        description="session-log rows: user_id, session_id, msg_seq, role, content, ts, message_id, agent_id",
    )


class _RecallOptions(_Body):
    user_id: str = Field(min_length=1, description="recall is always scoped to one user")
    top_k: int | None = Field(None, description="results per query (default: the store's recall_top_k)")
    min_sim: float | None = Field(None, description="minimum raw cosine similarity (default: recall_min_sim)")
    kinds: list[str] | None = Field(None, description="only these kinds (fact, preference, skill, ...)")
    record_access: bool = Field(True, description="log returned memories as accesses (they reinforce)")
    agent_id: str | None = Field(None, description="narrow to memories with a source message from this agent")
    session_id: str | None = Field(None, description="narrow to memories with a source message from this session")


class RecallBody(_RecallOptions):
    query: str | None = Field(None, description="query text (or give vector)")
    vector: list[float] | None = Field(None, description="precomputed query embedding (or give query)")


class RecallManyBody(_RecallOptions):
    queries: list[Query] = Field(min_length=1, max_length=MAX_QUERIES,
                                 description="query texts or vectors, answered in one statement")


class PromptBody(RecallManyBody):
    budget_chars: int = Field(1200, ge=1, description="size budget of the prompt block in characters")


class ForgetBody(_Body):
    user_id: str | None = Field(None, description="forget every memory of this user (right to erasure)")
    memory_id: str | None = Field(None, description="forget one memory")
    actor: str = Field("api", description="who asked, for the audit trail")


class BuildBody(_Body):
    full_refresh: bool = False
    vars: dict[str, Any] | None = Field(None, description="dbt vars a caller may set: only as_of, an ISO-8601 "
                                                          "date or timestamp, e.g. {\"as_of\": \"2026-12-01\"}")


class Memory(BaseModel):
    memory_id: str
    kind: str
    content: str
    similarity: float
    strength: float
    score: float
    source_message_ids: list[str]
    rank: int


class RecallResponse(BaseModel):
    results: list[Memory]
    snapshot: str | None


class RecallManyResponse(BaseModel):
    results: list[list[Memory]]
    snapshot: str | None


class ErrorResponse(BaseModel):
    error: str


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 409, 413, 422, 500)
}


def _status(exc: AgentMemoryError) -> int:
    for cls, code in STATUS:
        if isinstance(exc, cls):
            return code
    return 400


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            return "invalid request: the body is not valid JSON (" + str(err.get("ctx", {}).get("error", "")) + ")"
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        parts.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


def create_app(service: MemoryService, guard: Guard | None = None) -> FastAPI:
    """The FastAPI application for one service (one store), behind ``guard`` when given."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        service.warm_up()
        yield
        service.close()

    app = FastAPI(
        title="agent-memory",
        version="0.1.0",
        summary="Long-term memory for AI agents: remember messages, recall memories by meaning.",
        description="Writes land durably and become recallable after the next build; reads use the "
                    "newest published serving snapshot. See docs/server.md.",
        lifespan=lifespan,
    )

    @app.exception_handler(AgentMemoryError)
    async def _agent_memory_error(_: Request, exc: AgentMemoryError) -> JSONResponse:
        body: dict[str, Any] = {"error": str(exc), "type": type(exc).__name__}
        return JSONResponse(body, status_code=_status(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg")} for e in exc.errors()]
        return JSONResponse({"error": _validation_message(exc), "detail": detail}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"error": "internal error; the details are in the server's log"}, status_code=500)

    @app.get("/health", summary="Liveness and readiness (ready: a snapshot is published); with the token "
                                "also the snapshot name, model and defaults")
    async def health(request: Request) -> dict[str, Any]:  # async: answered even when every worker is busy
        return service.health(detail=guard is None or bool(getattr(request.state, "authenticated", False)))

    @app.post("/remember", status_code=202, responses=ERRORS,
              summary="Append one message to the session log (durable on return)")
    def remember(body: RememberBody) -> dict[str, Any]:
        fields = body.model_dump(exclude={"user_id", "content"})
        return service.remember(body.user_id, body.content, **fields)

    @app.post("/ingest", status_code=202, responses=ERRORS, summary="Land many session-log rows as one file")
    def ingest(body: IngestBody) -> dict[str, Any]:
        return service.ingest(body.rows)

    @app.post("/recall", response_model=RecallResponse, responses=ERRORS,
              summary="Recall one user's memories for one query text or vector")
    def recall(body: RecallBody) -> dict[str, Any]:
        return service.recall(body.user_id, body.query, body.vector, top_k=body.top_k, min_sim=body.min_sim,
                              kinds=body.kinds, record_access=body.record_access,
                              agent_id=body.agent_id, session_id=body.session_id)

    @app.post("/recall-many", response_model=RecallManyResponse, responses=ERRORS,
              summary="Recall for several intents of one user in one statement")
    def recall_many(body: RecallManyBody) -> dict[str, Any]:
        return service.recall_many(body.user_id, body.queries, top_k=body.top_k, min_sim=body.min_sim,
                                   kinds=body.kinds, record_access=body.record_access,
                              agent_id=body.agent_id, session_id=body.session_id)

    @app.post("/prompt", responses=ERRORS, summary="Recall and format the memories as a system-prompt block")
    def prompt(body: PromptBody) -> dict[str, Any]:
        return service.prompt(body.user_id, body.queries, budget_chars=body.budget_chars, top_k=body.top_k,
                              min_sim=body.min_sim, kinds=body.kinds, record_access=body.record_access,
                              agent_id=body.agent_id, session_id=body.session_id)

    @app.post("/forget", responses={**ERRORS, 501: {"model": ErrorResponse}},
              summary="Forget one memory or every memory of a user everywhere, at once (audited)")
    def forget(body: ForgetBody, request: Request) -> dict[str, Any]:
        principal = getattr(request.state, "principal", None)  # the audit names who authenticated
        actor = f"{principal} (says: {body.actor})" if principal else body.actor
        return service.forget(user_id=body.user_id, memory_id=body.memory_id, actor=actor)

    @app.post("/build", responses=ERRORS, summary="Run dbt build for this store and publish a snapshot")
    def build(body: BuildBody | None = None) -> dict[str, Any]:
        body = body or BuildBody()
        return service.build(full_refresh=body.full_refresh, vars=body.vars)

    if guard is not None:
        app.add_middleware(GuardMiddleware, guard=guard)
    return app


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(db: str | os.PathLike[str] | None, host: str = "127.0.0.1", port: int = 8765,
          log_level: Literal["critical", "error", "warning", "info", "debug"] = "info", *,
          token_file: str | os.PathLike[str] | None = None, no_auth: bool = False,
          allow_hosts: list[str] | None = None, max_body_bytes: int | None = None,
          header_timeout: float = DEFAULT_HEADER_TIMEOUT, body_timeout: float = DEFAULT_BODY_TIMEOUT,
          keep_alive_timeout: float = 5.0, limit_concurrency: int = 64) -> None:
    """Run the HTTP server until interrupted (one process, one store, model loaded once)."""
    if no_auth and not _is_loopback(host):
        raise SystemExit(f"agent-memory serve: --no-auth is for loopback only, not {host}")
    service = MemoryService(db)
    paths = getattr(service.store, "paths", None)
    token = None
    if not no_auth:
        tf = Path(token_file) if token_file else Path(os.environ.get(TOKEN_FILE_ENV, "") or
                                                      default_token_file(paths.db if paths else None))
        token = resolve_token(tf)
    limit = max_body_bytes if max_body_bytes is not None else int(os.environ.get(MAX_BODY_ENV) or DEFAULT_MAX_BODY_BYTES)
    if limit < 1024:
        raise SystemExit("agent-memory serve: the body limit must be at least 1024 bytes")
    guard = Guard(token, allowed_hosts(host, allow_hosts), port, limit, body_timeout)
    GuardedH11Protocol.header_timeout = header_timeout
    auth = "no authentication (--no-auth, loopback only)" if no_auth else "bearer token required"
    print(f"agent-memory: serving {service.location} on http://{host}:{port} ({auth}; "
          f"OpenAPI at /openapi.json)", file=sys.stderr, flush=True)
    config = uvicorn.Config(create_app(service, guard), host=host, port=port, log_level=log_level,
                            http=GuardedH11Protocol, timeout_keep_alive=keep_alive_timeout,
                            limit_concurrency=limit_concurrency)
    uvicorn.Server(config).run()
