"""HTTP JSON API over :class:`MemoryService` (FastAPI; OpenAPI at ``/openapi.json``, docs at ``/docs``).

    agent-memory serve --db data/agent_memory.duckdb --host 127.0.0.1 --port 8765

Every request passes recall_shim/interfaces/http_guard.py first (Host check, bearer token, body limit and
timeouts). Every error is JSON ``{"error": "..."}``: malformed bodies 422, invalid queries or
input 400, no token 401, too large 413, no published snapshot yet, a build already running or a busy
warehouse 409, a write the disk refused 507, an operation this store lacks 501, a failed build 500 (short message; details in the log).
"""

from __future__ import annotations

import inspect
import ipaddress
import logging
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Literal, Optional

from recall_shim.errors import (
    AgentMemoryError,
    BuildFailed,
    BuildInProgress,
    ConnectionFailed,
    DimensionMismatch,
    InvalidInput,
    InvalidQuery,
    PermissionDenied,
    StorageFailure,
    StoreBusy,
    StoreNotBuilt,
    StoreNotMigrated,
    TooLarge,
    UnknownEmbeddingModel,
)
from recall_shim.common.paths import package_version
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
from recall_shim.interfaces.requests import OPERATIONS, Operation, Request as OperationRequest, describe_errors
from recall_shim.interfaces.service import DEFAULT_ACTOR, MemoryService, OperationUnavailable
from recall_shim.serving.recalled import wire_fields

try:
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from fastapi_offline import FastAPIOffline
    from pydantic import BaseModel, create_model
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
    (PermissionDenied, 403),  # the PostgreSQL role lacks the privilege (docs/scaling_out.md, Roles)
    (StoreNotMigrated, 503),
    (ConnectionFailed, 503),
    (DimensionMismatch, 400),
    (InvalidQuery, 400),
    (InvalidInput, 400),
    (OperationUnavailable, 501),
    (UnknownEmbeddingModel, 500),
    (BuildFailed, 500),
]


# one recalled memory on the wire: the fields of RecalledMemory.as_dict (one definition)
Memory = create_model("Memory", **wire_fields())  # type: ignore[call-overload]


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


JSON_TYPES = ("application/json",)


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media in JSON_TYPES or (media.startswith("application/") and media.endswith("+json"))


def _validation_message(exc: RequestValidationError, content_type: str | None) -> str:
    errors = exc.errors()
    for err in errors:
        if err.get("type") == "json_invalid":
            return "invalid request: the body is not valid JSON (" + str(err.get("ctx", {}).get("error", "")) + ")"
    if not _is_json(content_type) and any(e.get("loc", ())[:1] == ("body",) for e in errors):
        got = f"got {content_type!r}" if content_type else "no Content-Type was sent"
        return f"invalid request: the body must be a JSON object sent with 'Content-Type: application/json' ({got})"
    return "invalid request: " + describe_errors(errors, skip=("body",))


RESPONSES: dict[str, type[BaseModel]] = {"recall": RecallResponse, "recall_many": RecallManyResponse}


def _endpoint(service: MemoryService, op: Operation) -> Callable[..., dict[str, Any]]:
    """The route function of ``op``: its body is the operation's request model (one definition
    for HTTP and MCP, recall_shim/interfaces/requests.py)."""

    def endpoint(request: Request, body: OperationRequest | None = None) -> dict[str, Any]:
        body = body if body is not None else op.request()
        if op.name == "forget":
            principal = getattr(request.state, "principal", None)  # the audit names who authenticated
            said = getattr(body, "actor", None) or DEFAULT_ACTOR
            body = body.model_copy(update={"actor": f"{principal} (says: {said})" if principal else said})
        return service.call(op, body)

    optional = op.request.model_fields and not any(f.is_required() for f in op.request.model_fields.values())
    body_param = inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                   annotation=Optional[op.request] if optional else op.request,
                                   default=None if optional else inspect.Parameter.empty)
    request_param = inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [request_param, body_param], return_annotation=dict[str, Any])
    endpoint.__name__ = op.name
    return endpoint


def create_app(service: MemoryService, guard: Guard | None = None) -> FastAPI:
    """The FastAPI application for one service (one store), behind ``guard`` when given."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        service.warm_up()
        yield
        service.close()

    app = FastAPIOffline(  # /docs and /redoc from assets shipped in the package: no CDN, works offline
        title="agent-memory",
        version=package_version(),
        summary="Long-term memory for AI agents: remember messages, recall memories by meaning.",
        description="Writes land durably and are recallable within seconds, before any build (the hot tail); reads use the "
                    "newest published serving snapshot. See docs/server.md.",
        lifespan=lifespan,
    )

    @app.exception_handler(AgentMemoryError)
    async def _agent_memory_error(_: Request, exc: AgentMemoryError) -> JSONResponse:
        body: dict[str, Any] = {"error": str(exc), "type": type(exc).__name__}
        return JSONResponse(body, status_code=_status(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg")} for e in exc.errors()]
        message = _validation_message(exc, request.headers.get("content-type"))
        return JSONResponse({"error": message, "detail": detail}, status_code=422)

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

    for op in OPERATIONS:
        if op.name == "health":
            continue  # GET /health above: open, and without detail unless authenticated
        extra = {501: {"model": ErrorResponse}} if op.name == "forget" else {}
        app.post(op.path, status_code=op.http_status, responses={**ERRORS, **extra},
                 response_model=RESPONSES.get(op.name), summary=op.description.split(". ")[0].rstrip("."),
                 description=op.description)(_endpoint(service, op))

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
