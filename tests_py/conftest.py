"""Shared fixtures: real stores in temporary folders, built with real dbt runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from recall_shim import BackendUnavailable, LocalPostgres, MemoryStore

ROOT = Path(__file__).resolve().parents[1]
DEMO_LOG = ROOT / "demo" / "session_log.jsonl"

# The slowest files, slowest first (seconds of each file's tests in a full run). scripts/test.sh
# runs `--dist loadfile --no-loadscope-reorder`: xdist hands whole files to the two workers in
# collection order, so these start first and the many short files fill the gaps at the end (a
# long file handed out last leaves the other worker idle). Only the order changes, never a test.
SLOW_FIRST = (  # measured 2026-12-06 (.ci/run, junit): 132 s for the first down to 26 s for the last
    "test_incremental.py", "test_unchanged_build.py", "test_serving_layers.py", "test_postgres.py",
    "test_crash_safety.py", "test_retention.py", "test_hybrid_index.py", "test_postgres_incremental.py",
    "test_hot_tail.py", "test_wheel_install.py", "test_parse_cache.py", "test_llm_extraction.py", "test_concurrency.py",
    "test_server.py", "test_forget.py", "test_index.py", "test_security_races.py", "test_postgres_user_cache.py",
    "test_postgres_serving.py", "test_terms_incremental.py", "test_security_disk_failures.py", "test_postgres_tail.py",
    "test_security_forget_scope.py", "test_postgres_index.py", "test_isolation.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the files of SLOW_FIRST first (a stable sort: the order within a file is kept)."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FIRST)))


def start_postgres(server: LocalPostgres) -> Any:
    """Start ``server`` and return its connection. When it cannot start, the test fails if
    AGENT_MEMORY_REQUIRE_POSTGRES=1 (scripts/test.sh) and is skipped otherwise."""
    try:
        return server.start()
    except BackendUnavailable as exc:
        if os.environ.get("AGENT_MEMORY_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required here but could not start: {exc}")
        pytest.skip(f"PostgreSQL with pgvector could not be started: {exc}")


def query(store: MemoryStore, sql: str, params: list | None = None) -> list[tuple]:
    """Read the warehouse (never while a build runs: tests build synchronously)."""
    con = duckdb.connect(str(store.paths.db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    """The demo log ingested and built once, shared read-only by recall tests."""
    store = MemoryStore(tmp_path_factory.mktemp("demo") / "store.duckdb")
    store.ingest(DEMO_LOG)
    store.build()
    return store


def copy_store(db: Path, dest: Path) -> Path:
    """Copy every file of the built store named by ``db`` (warehouse, inbox, serving snapshots and
    index, audit; not its dbt target folder) into folder ``dest``; returns the copy's path. Far
    cheaper than building the same store again: tests that change a store work on a copy of a
    module's built template, tests that only read share the template."""
    dest.mkdir(parents=True, exist_ok=True)
    stem = db.with_suffix("").name
    for p in db.parent.iterdir():
        if p.name.startswith(stem) and not p.name.endswith(".dbt"):
            (shutil.copytree if p.is_dir() else shutil.copy2)(p, dest / p.name)
    return dest / db.name


@pytest.fixture()
def fresh_store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "store.duckdb")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunningServer:
    """`agent-memory serve` in a subprocess on loopback; stopped by ``stop()``. It requires the
    bearer token ``self.token`` (passed as $AGENT_MEMORY_TOKEN); send ``self.headers``."""

    def __init__(self, db: Path, log: Path, args: list[str] | None = None,
                 env: dict[str, str] | None = None, exe: str | None = None) -> None:
        import os
        import secrets
        import subprocess
        import sys
        import time

        import httpx

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_urlsafe(16)
        self.headers = {"Authorization": f"Bearer {self.token}"}
        self.log_path = log
        exe = exe or str(Path(sys.executable).with_name("agent-memory"))
        self._log = open(log, "w")
        self.proc = subprocess.Popen([exe, "serve", "--db", str(db), "--port", str(self.port), *(args or [])],
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "AGENT_MEMORY_TOKEN": self.token, **(env or {})})
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {log.read_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server did not start: {log.read_text()}")
            time.sleep(0.2)

    def post(self, path: str, body: object, **kwargs: Any) -> Any:
        """POST ``body`` as JSON with the token."""
        import httpx

        return httpx.post(self.url + path, json=body, headers=self.headers, timeout=kwargs.pop("timeout", 120),
                          **kwargs)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def raw_http(port: int, data: bytes, timeout: float = 20) -> str:
    """Send raw bytes to a server on loopback and read the answer until it closes the connection
    (a server that neither answers nor closes raises socket.timeout)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        parts = []
        while chunk := s.recv(65536):
            parts.append(chunk)
    return b"".join(parts).decode("utf-8", "replace")
