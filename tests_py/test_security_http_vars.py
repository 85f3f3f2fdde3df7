"""Attack class: dbt vars from a server caller (`POST /build`, MCP `build`). Only allow-listed
vars (as_of, a strict ISO timestamp) pass; paths, URLs, credentials, SQL fragments and limits
are refused with 400 naming the var, before any build runs. A failed build answers a short 500
(no dbt output, which can hold data and SQL); the details go to the server's log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import anyio
import pytest

from .conftest import RunningServer
from .test_mcp import _session_calls

REFUSED = [
    ("as_of", "2026-01-01' as as_of_at, (select string_agg(content, '|') from stg_session_log) as leak --"),
    ("as_of", "now()"),
    ("as_of", "2026-13-45"),
    ("as_of", 20260101),
    ("store_path", "/tmp/another/store.duckdb"),
    ("llm_url", "http://127.0.0.1:9/v1"),
    ("llm_model", "x"),
    ("max_content_chars", 10**9),
    ("recall_max_top_k", 10**6),
    ("embedding_model", "fuse"),
    ("retention_days", 0),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("vars")
    # not a DuckDB file: any build that starts fails (quickly), so nothing here builds for real
    (folder / "bad.duckdb").write_bytes(b"not a database: SECRET-ROW alice likes green tea\n" * 50)
    running = RunningServer(folder / "bad.duckdb", folder / "server.log")
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize("name,value", REFUSED, ids=[f"{n}-{i}" for i, (n, _) in enumerate(REFUSED)])
def test_build_refuses_vars_off_the_allow_list_or_out_of_range(server: RunningServer, name: str, value: object) -> None:
    r = server.post("/build", {"vars": {name: value}})
    assert r.status_code == 400, r.text
    assert name in r.json()["error"] and r.json()["type"] == "InvalidInput"


def test_failed_build_answers_a_short_500_and_logs_the_details(server: RunningServer) -> None:
    r = server.post("/build", {"vars": {"as_of": "2026-12-01T08:00:00Z"}}, timeout=300)
    assert r.status_code == 500, r.text
    body = r.json()
    assert set(body) == {"error", "type"} and body["type"] == "BuildFailed"
    assert "SECRET-ROW" not in r.text and "bad.duckdb" not in r.text and "Traceback" not in r.text
    assert "server's log" in body["error"]
    log = server.log_path.read_text()
    assert "not a valid DuckDB database file" in log  # the operator still sees why
    assert "\x1b" not in log  # as plain text: no colour codes of dbt's


def test_mcp_build_uses_the_same_allow_list(tmp_path: Path) -> None:
    db = tmp_path / "mcp.duckdb"
    calls = [("build", {"vars": {"as_of": "2026-01-01'; select * from stg_session_log --"}})]
    _, (res,) = anyio.run(_session_calls, db, calls)
    assert res.is_error and "as_of" in res.content[0].text and "ISO-8601" in res.content[0].text
    assert not db.exists()  # refused before a build started
    assert json.dumps("Traceback") not in res.content[0].text
