"""HTTP JSON API over :class:`MemoryService` (FastAPI; OpenAPI at ``/openapi.json``, docs at ``/docs``).

    agent-memory serve --db data/agent_memory.duckdb --host 127.0.0.1 --port 8765

Every error is JSON ``{"error": "..."}``: malformed bodies 422, invalid queries or input 400,
no published snapshot yet 409, an operation this store lacks 501, a failed build 500.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Literal, Union

from ._errors import (
    AgentMemoryError,
    BuildFailed,
    DimensionMismatch,
    InvalidInput,
    InvalidQuery,
    StoreNotBuilt,
    UnknownEmbeddingModel,
)
from ._service import MAX_INGEST_ROWS, MAX_QUERIES, MemoryService, OperationUnavailable

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
    (StoreNotBuilt, 409),
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
    vars: dict[str, Any] | None = Field(None, description="dbt vars, e.g. {\"as_of\": \"2026-12-01\"}")


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
    code: {"model": ErrorResponse} for code in (400, 409, 422, 500)
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


def create_app(service: MemoryService) -> FastAPI:
    """The FastAPI application for one service (one store)."""

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
        if isinstance(exc, BuildFailed):
            body["output"] = exc.output[-4000:]
        return JSONResponse(body, status_code=_status(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg")} for e in exc.errors()]
        return JSONResponse({"error": _validation_message(exc), "detail": detail}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    @app.get("/health", summary="Liveness and readiness (ready: a snapshot is published)")
    def health() -> dict[str, Any]:
        return service.health()

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
    def forget(body: ForgetBody) -> dict[str, Any]:
        return service.forget(user_id=body.user_id, memory_id=body.memory_id, actor=body.actor)

    @app.post("/build", responses=ERRORS, summary="Run dbt build for this store and publish a snapshot")
    def build(body: BuildBody | None = None) -> dict[str, Any]:
        body = body or BuildBody()
        return service.build(full_refresh=body.full_refresh, vars=body.vars)

    return app


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(db: str | os.PathLike[str] | None, host: str = "127.0.0.1", port: int = 8765,
          log_level: Literal["critical", "error", "warning", "info", "debug"] = "info") -> None:
    """Run the HTTP server until interrupted (one process, one store, model loaded once)."""
    if not _is_loopback(host):
        print(f"agent-memory serve: listening on {host}, not loopback: the API has no authentication; "
              "put it behind your own proxy", file=sys.stderr)
    service = MemoryService(db)
    print(f"agent-memory: serving {service.location} on http://{host}:{port} "
          f"(OpenAPI at /openapi.json)", file=sys.stderr, flush=True)
    uvicorn.run(create_app(service), host=host, port=port, log_level=log_level)
