"""What every HTTP request passes before it reaches the API (docs/server.md "Security").

- **Host check**: the ``Host`` header must name this server (the bound host, ``localhost``,
  ``127.0.0.1``, ``[::1]``, or an extra name given by the operator), with the bound port when a
  port is given. A DNS-rebinding page sends its own name and gets 400.
- **Bearer token**: ``Authorization: Bearer <token>``, compared in constant time; 401 without
  it. Only ``GET /health`` (which then says no more than status and readiness) is open.
- **Body limit and body timeout**: the body is read here, chunk by chunk, and refused with 413
  as soon as it passes the limit (a ``Content-Length`` over the limit is refused before a byte is
  read); a body that does not arrive within the timeout gets 408.
- **Header timeout**: :class:`GuardedH11Protocol` closes a connection whose request head does
  not arrive within the timeout (uvicorn has a keep-alive timeout, but none for a slow head).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from uvicorn.protocols.http.h11_impl import H11Protocol

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_ENV = "AGENT_MEMORY_TOKEN"
TOKEN_FILE_ENV = "AGENT_MEMORY_TOKEN_FILE"
ALLOWED_HOSTS_ENV = "AGENT_MEMORY_ALLOWED_HOSTS"
MAX_BODY_ENV = "AGENT_MEMORY_MAX_BODY_BYTES"
DEFAULT_MAX_BODY_BYTES = 1_048_576  # 1 MiB: a remember of max_content_chars fits many times over
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_HEADER_TIMEOUT = 10.0
LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")
OPEN_PATHS = {"/health"}


@dataclass(frozen=True)
class Guard:
    """The checks of one server: ``token`` None means the loopback-only opt-out (--no-auth)."""

    token: str | None
    hosts: frozenset[str]
    port: int
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    principal: str = field(init=False)

    def __post_init__(self) -> None:
        name = ("token:" + hashlib.sha256(self.token.encode()).hexdigest()[:8]) if self.token else "unauthenticated-loopback"
        object.__setattr__(self, "principal", name)

    def host_ok(self, value: str | None) -> bool:
        if not value:
            return False
        value = value.strip().lower()
        if value.startswith("["):
            name, _, rest = value.partition("]")
            name, port = name + "]", rest[1:] if rest.startswith(":") else None
        elif value.count(":") == 1:
            name, port = value.split(":")
        else:
            name, port = value, None
        if port is not None and port != str(self.port):
            return False
        return name in self.hosts

    def token_ok(self, header: str | None) -> bool:
        if self.token is None:
            return True
        if not header or not header[:7].lower() == "bearer ":
            return False
        return hmac.compare_digest(header[7:].strip().encode("utf-8", "replace"), self.token.encode("utf-8"))


def allowed_hosts(bound: str, extra: list[str] | None = None) -> frozenset[str]:
    """The names a request's Host header may carry: the bound host (unless a wildcard), the
    loopback names, and ``extra`` plus $AGENT_MEMORY_ALLOWED_HOSTS (comma-separated)."""
    names = set(LOCAL_NAMES)
    if bound not in ("0.0.0.0", "::", ""):
        names.add(f"[{bound}]" if ":" in bound and not bound.startswith("[") else bound)
    env = [h for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if h.strip()]
    names.update(h.strip().lower() for h in [*(extra or []), *env])
    return frozenset(n.lower() for n in names)


def default_token_file(db_location: Path | None) -> Path:
    """Beside the DuckDB store (``<stem>.token``), else in the user's config folder."""
    if db_location is not None:
        return db_location.with_name(db_location.stem + ".token")
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "agent-memory" / "server.token"


def resolve_token(token_file: Path) -> str:
    """$AGENT_MEMORY_TOKEN, else the token in ``token_file``, else a new one written there
    (mode 0600, created exclusively) and printed once to stderr."""
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return env
    if token_file.exists():
        token = token_file.read_text(encoding="utf-8").strip()
        if not token:
            raise SystemExit(f"agent-memory serve: the token file {token_file} is empty")
        return token
    token = secrets.token_urlsafe(32)
    token_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    print(f"agent-memory serve: generated an access token, kept in {token_file} (mode 0600):\n"
          f"    {token}\nsend it as 'Authorization: Bearer <token>'", file=sys.stderr, flush=True)
    return token


async def _reply(send: Send, status: int, error: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": error}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class GuardMiddleware:
    """ASGI middleware applying a :class:`Guard` to every HTTP request."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        g = self.guard
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not g.host_ok(headers.get("host")):
            await _reply(send, 400, "invalid Host header: this server answers only to its own names "
                                    "(see --allow-host)")
            return
        open_path = scope.get("path") in OPEN_PATHS and scope.get("method") in ("GET", "HEAD")
        authed = g.token_ok(headers.get("authorization"))
        if not authed and not open_path:
            await _reply(send, 401, "authentication required: send 'Authorization: Bearer <token>' "
                                    "(docs/server.md)", [(b"www-authenticate", b"Bearer")])
            return
        scope.setdefault("state", {})
        scope["state"]["principal"] = g.principal if authed and g.token else None
        scope["state"]["authenticated"] = authed
        declared = headers.get("content-length")
        if declared is not None and (not declared.strip().isdigit() or int(declared) > g.max_body_bytes):
            await _reply(send, 413, f"the request body is over the limit of {g.max_body_bytes} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + g.body_timeout
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                await _reply(send, 408, f"the request body did not arrive within {g.body_timeout:g} s")
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > g.max_body_bytes:
                await _reply(send, 413, f"the request body is over the limit of {g.max_body_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus a timeout for the request head (slow-header clients)."""

    header_timeout = DEFAULT_HEADER_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(None)

    def _arm(self, cycle: object) -> None:
        self._head_of = cycle  # the request cycle that was current when the wait began
        self._head_timer: asyncio.TimerHandle | None = self.loop.call_later(self.header_timeout, self._head_late)

    def _disarm(self) -> None:
        if getattr(self, "_head_timer", None) is not None:
            self._head_timer.cancel()  # type: ignore[union-attr]
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.cycle is self._head_of and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not getattr(self, "_head_of", None):
            self._disarm()

    def on_response_complete(self) -> None:
        previous = self.cycle
        super().on_response_complete()
        if not self.transport.is_closing() and self.cycle is previous:
            self._disarm()
            self._arm(previous)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
