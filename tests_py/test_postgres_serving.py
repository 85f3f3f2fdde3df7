"""The CLI and the HTTP server on the PostgreSQL target (docs/scaling_out.md): `agent-memory
--target postgres` and `AGENT_MEMORY_TARGET=postgres agent-memory serve` against a real server
from the pgserver wheel, with the same commands and endpoints as on DuckDB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from recall_shim import LocalPostgres

from .conftest import DEMO_LOG, free_port, start_postgres

SEED_QUESTIONS = ["喜欢什么输出方式", "做过什么数据分析", "熟悉什么部署工具"]


@pytest.fixture(scope="module")
def pg_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Environment selecting a fresh PostgreSQL store for the CLI and the server."""
    server = LocalPostgres(tmp_path_factory.mktemp("pg_cli") / "data", schema="cli_store")
    conn = start_postgres(server)
    env = dict(os.environ)
    env.update(conn.dbt_env())
    env["AGENT_MEMORY_PG_WORK_DIR"] = str(tmp_path_factory.mktemp("pg_cli_work"))
    env.pop("AGENT_MEMORY_TARGET", None)
    yield env
    server.stop()


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    exe = str(Path(sys.executable).with_name("agent-memory"))
    return subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=600)


def test_cli_ingest_build_recall_forget(pg_env: dict[str, str]) -> None:
    r = cli(pg_env, "ingest", "--target", "postgres", str(DEMO_LOG))
    assert r.returncode == 0 and "landed 10 rows" in r.stdout, r.stderr
    r = cli(pg_env, "--target", "postgres", "remember", "--user", "cli_u", "--session", "s9", "I live in Oslo")
    assert r.returncode == 0 and r.stdout.startswith("msg_"), r.stderr
    r = cli(pg_env, "build", "--target", "postgres")
    assert r.returncode == 0 and "on postgres" in r.stdout, r.stderr
    r = cli(pg_env, "recall", "--target", "postgres", "--user", "demo", "--json", "--top-k", "1", "--no-access",
            "--kind", "preference", SEED_QUESTIONS[0])
    assert r.returncode == 0, r.stderr
    assert [m["source_message_ids"] for m in json.loads(r.stdout)] == [["demo-s1-1"]]
    r = cli({**pg_env, "AGENT_MEMORY_TARGET": "postgres"}, "recall", "--user", "cli_u", "--session", "s9",
            "--json", "--no-access", "where does the user live?")
    assert r.returncode == 0 and "User lives in Oslo" in [m["content"] for m in json.loads(r.stdout)], r.stderr
    r = cli(pg_env, "forget", "--target", "postgres", "--user", "cli_u", "--actor", "cli-test", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["found"] and report["memories"] >= 1 and report["actor"] == "cli-test"
    r = cli(pg_env, "recall", "--target", "postgres", "--user", "cli_u", "--json", "where does the user live?")
    assert r.returncode == 0 and json.loads(r.stdout) == []
    r = cli(pg_env, "recall", "--target", "postgres", "--db", "x.duckdb", "--user", "demo", "q")
    assert r.returncode == 2 and "AGENT_MEMORY_PG_" in r.stderr  # --db names a DuckDB file


@pytest.fixture(scope="module")
def pg_server(pg_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("pg_srv") / "server.log"
    exe = str(Path(sys.executable).with_name("agent-memory"))
    with open(log, "w") as fh:
        proc = subprocess.Popen([exe, "--target", "postgres", "serve", "--port", str(port)],
                                env={**pg_env, "AGENT_MEMORY_TOKEN": TOKEN}, stdout=fh, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        try:
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


TOKEN = "pg-serving-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def post(url: str, path: str, body: Any) -> httpx.Response:
    return httpx.post(url + path, json=body, headers=AUTH, timeout=300)


def test_http_server_on_postgres(pg_server: str, pg_env: dict[str, str]) -> None:
    url = pg_server
    health = httpx.get(url + "/health", headers=AUTH).json()
    assert health["status"] == "ok" and "db" not in health  # /health names no path or URL
    r = post(url, "/remember", {"user_id": "http_u", "content": "I prefer green tea", "session_id": "h1"})
    assert r.status_code == 202, r.text
    r = post(url, "/ingest", {"rows": [{"user_id": "http_u", "session_id": "h1", "msg_seq": 2, "role": "user",
                                        "content": "I live in Porto", "ts": "2026-11-01 10:00:00"}]})
    assert r.status_code == 202 and r.json()["rows"] == 1, r.text
    r = post(url, "/build", {})
    assert r.status_code == 200, r.text
    health = httpx.get(url + "/health", headers=AUTH).json()
    assert health["ready"] is True and health["embedding_dim"] == 384
    r = post(url, "/recall-many", {"user_id": "http_u", "queries": ["what does the user drink?",
                                                                     "where does the user live?"],
                                   "top_k": 1, "min_sim": 0, "kinds": ["preference", "fact"], "record_access": False})
    assert r.status_code == 200, r.text
    assert [g[0]["content"] for g in r.json()["results"]] == ["User prefers green tea", "User lives in Porto"]
    r = post(url, "/prompt", {"user_id": "http_u", "queries": ["where does the user live?"], "min_sim": 0})
    assert r.status_code == 200 and "User lives in Porto" in r.json()["prompt"]
    r = post(url, "/recall", {"user_id": " ", "query": "x"})
    assert r.status_code in (400, 422)
    r = post(url, "/forget", {"user_id": "http_u"})
    assert r.status_code == 200 and r.json()["forgotten"]["found"] is True, r.text
    r = post(url, "/recall", {"user_id": "http_u", "query": "where does the user live?", "min_sim": 0})
    assert r.status_code == 200 and r.json()["results"] == []
