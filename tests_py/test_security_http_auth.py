"""Attack class: unauthenticated callers and foreign Host headers (DNS rebinding). The server
requires a bearer token by default (on loopback too), from $AGENT_MEMORY_TOKEN or a token file
it generates beside the store (0600) on first start; it refuses Host headers that are not its
own; `/health` without the token says only status and readiness; forget records the
authenticated principal as the audit actor; --no-auth is refused off loopback."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from recall_shim import MemoryStore

from .conftest import RunningServer

EXE = str(Path(sys.executable).with_name("agent-memory"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("auth")
    running = RunningServer(folder / "store.duckdb", folder / "server.log")
    try:
        yield running
    finally:
        running.stop()


ROUTES = [("POST", "/recall", {"user_id": "alice", "query": "x"}),
          ("POST", "/remember", {"user_id": "alice", "content": "I am bob now"}),
          ("POST", "/forget", {"user_id": "alice"}),
          ("POST", "/build", {}),
          ("GET", "/openapi.json", None)]


@pytest.mark.parametrize("method,path,body", ROUTES, ids=[p for _, p, _ in ROUTES])
def test_every_route_but_health_needs_the_token(server: RunningServer, method: str, path: str, body: object) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": server.token}):
        r = httpx.request(method, server.url + path, json=body, headers=headers, timeout=60)
        assert r.status_code == 401, (headers, r.text)
        assert "token" in r.json()["error"]


def test_foreign_host_headers_are_refused(server: RunningServer) -> None:
    body = {"user_id": "alice", "content": "hello", "message_id": "host-ok"}
    for host in ("evil.example", f"evil.example:{server.port}", f"127.0.0.1:{server.port + 1}", ""):
        r = httpx.post(server.url + "/remember", json=body, headers={**server.headers, "Host": host}, timeout=60)
        assert r.status_code == 400 and "Host" in r.json()["error"], (host, r.text)
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "localhost"):
        r = httpx.post(server.url + "/remember", json=body, headers={**server.headers, "Host": host}, timeout=60)
        assert r.status_code == 202, (host, r.text)


def test_health_without_token_reveals_no_paths(server: RunningServer) -> None:
    open_health = httpx.get(server.url + "/health", timeout=30).json()
    assert set(open_health) == {"status", "ready"}
    full = httpx.get(server.url + "/health", headers=server.headers, timeout=30).json()
    assert "db" not in full and str(server.log_path.parent) not in json.dumps(full)


def test_forget_audits_the_authenticated_principal(server: RunningServer) -> None:
    r = server.post("/forget", {"user_id": "mallory", "actor": "somebody-else"})
    assert r.status_code == 200, r.text
    audit = MemoryStore(server.log_path.parent / "store.duckdb").paths.audit
    record = json.loads(audit.read_text().splitlines()[-1])
    assert record["actor"].startswith("token:") and "somebody-else" in record["actor"]


def test_token_file_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    server = RunningServer(tmp_path / "fresh.duckdb", tmp_path / "server.log",
                           env={"AGENT_MEMORY_TOKEN": "", "AGENT_MEMORY_TOKEN_FILE": ""})
    try:
        token_file = tmp_path / "fresh.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert token in server.log_path.read_text()  # printed once, at generation
        ok = httpx.post(server.url + "/recall", json={"user_id": "u", "query": "x"},
                        headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert ok.status_code == 409, ok.text  # authenticated; the store is just not built
        assert server.post("/recall", {"user_id": "u", "query": "x"}).status_code == 401  # the env token is off
    finally:
        server.stop()


def test_no_auth_is_refused_off_loopback(tmp_path: Path) -> None:
    out = subprocess.run([EXE, "serve", "--db", str(tmp_path / "s.duckdb"), "--host", "0.0.0.0", "--no-auth"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "loopback" in out.stderr


def test_no_auth_on_loopback_serves_without_a_token_but_still_checks_host(tmp_path: Path) -> None:
    server = RunningServer(tmp_path / "open.duckdb", tmp_path / "server.log", args=["--no-auth"])
    try:
        r = httpx.post(server.url + "/recall", json={"user_id": "u", "query": "x"}, timeout=60)
        assert r.status_code == 409, r.text  # no token needed; the store is just not built
        r = httpx.post(server.url + "/recall", json={"user_id": "u", "query": "x"}, headers={"Host": "evil.example"},
                       timeout=60)
        assert r.status_code == 400
        assert not (tmp_path / "open.token").exists()
    finally:
        server.stop()
