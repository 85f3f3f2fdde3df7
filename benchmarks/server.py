"""One ``agent-memory serve`` for the HTTP benchmarks (freshness, security_flood): started on a free
loopback port with a fresh bearer token, ready once ``/health`` says so, stopped on exit."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

import httpx

STARTUP_SECONDS = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(db: Path | None, log_path: Path,
                   env: Mapping[str, str] | None = None) -> Iterator[tuple[str, dict[str, str]]]:
    """``agent-memory serve --db db`` (log in ``log_path``) until the block ends: yields (base
    url, headers with the bearer token). ``db`` None: ``agent-memory --target postgres serve``
    with the store of ``env`` (AGENT_MEMORY_PG_*). SystemExit when it does not become ready."""
    port, token = free_port(), secrets.token_urlsafe(16)
    url, headers = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    exe = str(Path(sys.executable).with_name("agent-memory"))
    with open(log_path, "w") as log:
        where = ["--target", "postgres", "serve"] if db is None else ["serve", "--db", str(db)]
        proc = subprocess.Popen([exe, *where, "--port", str(port), "--log-level", "warning"],
                                env={**os.environ, **(env or {}), "AGENT_MEMORY_TOKEN": token},
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + STARTUP_SECONDS
            while True:
                try:
                    if httpx.get(url + "/health", timeout=5).json().get("ready"):
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the server did not start: " + log_path.read_text())
                time.sleep(0.2)
            yield url, headers
        finally:
            proc.terminate()
            proc.wait(timeout=60)
