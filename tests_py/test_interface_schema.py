"""HTTP and MCP take the same arguments, from one definition (recall_shim/interfaces/requests.py).

The real `agent-memory serve` (real HTTP client) and the real `agent-memory mcp` (the official
MCP SDK client over stdio), both on one unbuilt store: every check here is refused or answered
before a snapshot is needed, so no build runs.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, Iterator

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client import session as mcp_client_session

from recall_shim import InvalidQuery, MemoryStore
from recall_shim.common.paths import package_version
from recall_shim.errors import BuildFailed
from recall_shim.write.limits import memory_kinds

from .conftest import RunningServer

EXE = str(Path(sys.executable).with_name("agent-memory"))
# the same arguments, refused with the same sentence on both interfaces
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("recall", {"user_id": "demo", "query": "x", "top_k": "5"}, "top_k must be an integer, got the string '5'"),
    ("build", {"full_refresh": "yes"}, "full_refresh must be true or false, got the string 'yes'"),
    ("recall", {"user_id": "demo", "query": "x", "record_acces": False}, "unknown argument record_acces"),
    ("prompt", {"user_id": "demo", "queries": ["x"], "min_sim": "0.2"}, "min_sim must be a number"),
    ("forget", {"memory_id": "m", "colour": "red"}, "unknown argument colour"),
    ("build", {"as_of": "2026-12-01"}, "unknown argument as_of"),
    ("remember", {"user_id": "u", "content": "x", "msg_seq": True}, "msg_seq must be an integer, got the boolean True"),
    ("remember", {"user_id": "u", "content": " \n "}, "content must not be empty"),
    ("recall", {"user_id": "demo", "query": "x", "kinds": "skill"}, "kinds must be a list, got the string 'skill'"),
]


async def _mcp_session(db: Path) -> dict[str, Any]:
    params = StdioServerParameters(command=EXE, args=["mcp", "--db", str(db)], env={"OMP_WAIT_POLICY": "passive"})
    out: dict[str, Any] = {}
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                out["initialize"], out["server_info"] = init.capabilities, init.server_info
                out["tools"] = {t.name: t for t in (await session.list_tools()).tools}
                out["refused"] = [await session.call_tool(name, args) for name, args, _ in REFUSED]
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                # the SDK's probe waits 10 s, less than a server start on a busy 2-core machine
                # takes (imports and opening the store come before the first answer)
                with pytest.MonkeyPatch.context() as mp:
                    mp.setattr(mcp_client_session, "DISCOVER_TIMEOUT_SECONDS", 120.0)
                    out["discover"] = (await session.discover()).capabilities
    return out


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("interfaces")
    db = folder / "unbuilt.duckdb"
    server = RunningServer(db, folder / "server.log")
    try:
        yield server, anyio.run(_mcp_session, db)
    finally:
        server.stop()


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref") or next((s["$ref"] for s in schema.get("anyOf", []) if "$ref" in s), None)
    return spec["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


def _props(schema: dict[str, Any]) -> dict[str, Any]:
    # OpenAPI leaves out a null default, which is what a missing default means anyway
    return {name: {k: v for k, v in p.items() if not (k == "default" and v is None)}
            for name, p in schema["properties"].items()}


def test_http_and_mcp_expose_the_same_arguments(both: tuple[RunningServer, dict[str, Any]]) -> None:
    server, mcp = both
    spec = httpx.get(server.url + "/openapi.json", headers=server.headers).json()
    routes = {path: methods["post"] for path, methods in spec["paths"].items() if "post" in methods}
    assert spec["info"]["version"] == package_version()
    tools = mcp["tools"]
    assert set(tools) == {"remember", "ingest", "recall", "recall_many", "prompt", "forget", "health", "build"}
    assert {"/" + name.replace("_", "-") for name in tools if name != "health"} == set(routes)
    for name, tool in tools.items():
        if name == "health":
            assert tool.input_schema["properties"] == {} and "/health" in spec["paths"]
            continue
        body = _resolve(spec, routes["/" + name.replace("_", "-")]["requestBody"]["content"]["application/json"]["schema"])
        mcp_schema = tool.input_schema
        assert _props(body) == _props(mcp_schema), name
        assert body.get("required", []) == mcp_schema.get("required", []), name
        assert body["additionalProperties"] is False and mcp_schema["additionalProperties"] is False, name
    # the arguments the MCP tools lacked before: one schema, so they are there on both
    assert {"vector", "record_access"} <= set(tools["recall"].input_schema["properties"])
    assert {"min_sim", "kinds", "record_access"} <= set(tools["prompt"].input_schema["properties"])
    assert "vars" in tools["build"].input_schema["properties"]
    assert "msg_seq" in tools["remember"].input_schema["properties"]


def test_strict_types_and_unknown_arguments_refused_alike(both: tuple[RunningServer, dict[str, Any]]) -> None:
    server, mcp = both
    for (name, args, message), tool_result in zip(REFUSED, mcp["refused"]):
        r = server.post("/" + name.replace("_", "-"), args)
        assert r.status_code == 422, (name, args, r.text)
        assert message in r.json()["error"], (name, args, r.json())
        text = tool_result.content[0].text
        assert tool_result.is_error and message in text, (name, args, text)
        assert "pydantic" not in text and "Input should be" not in text and "Traceback" not in text
    # a build asked for with "full_refresh": "yes" never started
    assert httpx.get(server.url + "/health", headers=server.headers).json()["ready"] is False


def test_a_body_without_the_json_content_type_is_named(both: tuple[RunningServer, dict[str, Any]]) -> None:
    server, _ = both
    body = b'{"user_id": "demo", "query": "x"}'
    r = httpx.post(server.url + "/recall", content=body, headers=server.headers)
    assert r.status_code == 422 and "Content-Type: application/json" in r.json()["error"], r.text
    assert "no Content-Type was sent" in r.json()["error"]
    r = httpx.post(server.url + "/recall", content=body, headers={**server.headers, "content-type": "text/plain"})
    assert r.status_code == 422 and "got 'text/plain'" in r.json()["error"], r.text


def test_mcp_annotations_and_capabilities(both: tuple[RunningServer, dict[str, Any]]) -> None:
    _, mcp = both
    hints = {name: t.annotations for name, t in mcp["tools"].items()}
    for name in ("recall", "recall_many", "prompt", "health"):
        assert hints[name].read_only_hint is True, name
    for name in ("remember", "ingest", "forget", "build"):
        assert hints[name].read_only_hint is False, name
    assert hints["forget"].destructive_hint is True and hints["forget"].idempotent_hint is True
    assert hints["remember"].destructive_hint is False and hints["build"].destructive_hint is False
    # initialize (the 2025-11-25 handshake) and server/discover (2026-07-28) report the same: tools only
    init = mcp["initialize"].model_dump(exclude_none=True)
    assert init == mcp["discover"].model_dump(exclude_none=True)
    assert set(init) == {"tools"}
    assert mcp["server_info"].name == "agent-memory" and mcp["server_info"].version == package_version()


def test_docs_pages_work_offline(both: tuple[RunningServer, dict[str, Any]]) -> None:
    server, _ = both
    for page in ("/docs", "/redoc"):
        r = httpx.get(server.url + page, headers=server.headers)
        assert r.status_code == 200, page
        assert not re.search(r"https?://", r.text), f"{page} references an external URL"
        assets = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ?["']([^"']+)["']""", r.text)
        urls = {a or b for a, b in assets}
        assert any(u.endswith(".js") for u in urls), urls
        for url in urls:
            assert httpx.get(server.url + url, headers=server.headers).status_code == 200, url


def test_build_output_is_plain_text(tmp_path: Path) -> None:
    exc = BuildFailed("dbt build failed (exit 1)", "\x1b[0m08:00:01  \x1b[31mFailure in test\x1b[0m x\x1b[1m!\x1b[0m")
    assert exc.output == "08:00:01  Failure in test x!" and "\x1b" not in str(exc)
    # a real dbt run that fails at once (the store is not a DuckDB file): dbt writes no colour codes
    (tmp_path / "store.duckdb").write_bytes(b"not a database\n" * 50)
    store = MemoryStore(tmp_path / "store.duckdb")
    with pytest.raises(BuildFailed) as failed:
        store.build()
    assert "Running with dbt=" in failed.value.output and "\x1b" not in failed.value.output
    log = next(store.paths.dbt_dir.rglob("dbt.log")).read_text(encoding="utf-8")
    assert "Running with dbt=" in log and "\x1b" not in log


def test_known_kinds_come_from_the_models_contract() -> None:
    assert set(memory_kinds()) == {"fact", "preference", "skill", "episode", "assistant"}


def test_unknown_kinds_are_refused_by_the_api(demo_store: MemoryStore) -> None:
    with pytest.raises(InvalidQuery, match="unknown kind 'skills'; the kinds are fact, preference, skill, episode, assistant"):
        demo_store.recall("x", user_id="demo", kinds=["skills"], record_access=False)
    assert demo_store.recall("x", user_id="demo", kinds=["episode"], min_sim=-1, record_access=False) is not None
