"""The MCP server: the real `agent-memory mcp` over stdio, called with the mcp package's client."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from recall_shim import MemoryStore
from recall_shim.common.embedding import embed_texts

EXE = str(Path(sys.executable).with_name("agent-memory"))


async def _session_calls(db: Path, calls: list[tuple[str, dict[str, Any]]],
                         until: Callable[[Any], bool] | None = None) -> tuple[list[str], list[Any]]:
    """Run ``calls`` in one MCP session over stdio; with ``until``, the last call is repeated
    (up to a generous deadline) until ``until`` holds for its result."""
    params = StdioServerParameters(command=EXE, args=["mcp", "--db", str(db)],
                                   env={"OMP_WAIT_POLICY": "passive", **{k: v for k, v in os.environ.items()
                                                                         if k.startswith("AGENT_MEMORY_")}})
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = [t.name for t in (await session.list_tools()).tools]
                results = [await session.call_tool(name, args) for name, args in calls]
                deadline = time.monotonic() + 60
                while until is not None and not until(results[-1]) and time.monotonic() < deadline:
                    await anyio.sleep(0.1)
                    results[-1] = await session.call_tool(*calls[-1])
    return tools, results


def _access_events(store: MemoryStore) -> list[str]:
    return sorted(line for f in store.paths.access.glob("*.jsonl") for line in f.read_text().splitlines())


def test_mcp_tools_over_stdio(demo_store: MemoryStore) -> None:
    s = demo_store._reader.settings
    vector = [float(x) for x in embed_texts(s.embedding_model, s.embedding_query_form, ["熟悉什么部署工具"])[0]]
    accesses = _access_events(demo_store)
    calls = [
        ("health", {}),
        ("recall", {"user_id": "demo", "query": "熟悉什么部署工具", "top_k": 1, "min_sim": 0, "record_access": False}),
        ("recall_many", {"user_id": "demo", "queries": ["喜欢什么输出方式", "做过什么数据分析"], "top_k": 1, "min_sim": 0,
                         "kinds": ["preference", "fact", "skill"], "record_access": False}),
        ("prompt", {"user_id": "demo", "queries": ["喜欢什么输出方式"], "top_k": 1, "record_access": False}),
        ("remember", {"user_id": "mcp-user", "content": "I prefer dark mode.", "session_id": "m1"}),
        ("recall", {"user_id": "", "query": "x"}),
        ("recall", {"user_id": "demo"}),
        ("recall", {"user_id": "demo", "query": "x", "top_k": 1000}),
        ("prompt", {"user_id": "demo", "queries": ["x"] * 33}),
        ("recall_many", {"user_id": "demo", "queries": []}),
        # the arguments HTTP has: a vector query, prompt's min_sim and kinds, build's vars
        ("recall", {"user_id": "demo", "vector": vector, "top_k": 1, "min_sim": 0, "record_access": False}),
        ("prompt", {"user_id": "demo", "queries": ["喜欢什么输出方式"], "min_sim": 0.99, "kinds": ["skill"],
                    "record_access": False}),
        ("build", {"vars": {"store_path": "/tmp/x"}}),
        ("recall", {"user_id": "demo", "query": "x", "kinds": ["skills"], "record_access": False}),
    ]
    tools, res = anyio.run(_session_calls, demo_store.paths.db, calls)
    assert set(tools) == {"remember", "ingest", "recall", "recall_many", "prompt", "forget", "health", "build"}
    (health, recall, many, prompt, remember, no_user, no_query, big_k, many_prompts, no_queries,
     by_vector, narrow_prompt, bad_var, bad_kind) = res
    assert not health.is_error and health.structured_content["ready"] is True
    assert not recall.is_error
    top = recall.structured_content["results"][0]
    assert top["kind"] == "skill" and top["content"] == "用户熟悉 Cloudflare Tunnel 部署"
    # the text content carries the same JSON for clients that ignore structured content
    assert json.loads(recall.content[0].text)["results"][0]["memory_id"] == top["memory_id"]
    assert [g[0]["kind"] for g in many.structured_content["results"]] == ["preference", "fact"]
    assert "简洁的输出" in prompt.structured_content["prompt"]
    message_id = remember.structured_content["message_id"]
    landed = "".join(p.read_text() for p in demo_store.paths.messages.glob("*.jsonl"))
    assert message_id in landed and "I prefer dark mode." in landed
    assert no_user.is_error and "user_id must not be empty" in no_user.content[0].text
    assert no_query.is_error and "query" in no_query.content[0].text
    assert big_k.is_error and "top_k must be an integer from 1 to" in big_k.content[0].text
    assert many_prompts.is_error and "at most 32 queries per request, got 33" in many_prompts.content[0].text
    assert no_queries.is_error and "non-empty list" in no_queries.content[0].text
    assert "Traceback" not in no_user.content[0].text + big_k.content[0].text
    assert not by_vector.is_error and by_vector.structured_content["results"][0]["memory_id"] == top["memory_id"]
    assert not narrow_prompt.is_error and narrow_prompt.structured_content["prompt"] == ""
    assert bad_var.is_error and "var 'store_path' cannot be set by a server caller" in bad_var.content[0].text
    assert bad_kind.is_error and "unknown kind 'skills'; the kinds are fact, preference, skill, episode, assistant" in \
        bad_kind.content[0].text
    # record_access: false was honoured, not dropped: no recall of the session logged an access
    assert _access_events(demo_store) == accesses
