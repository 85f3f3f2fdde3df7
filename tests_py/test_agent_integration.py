"""The agent-integration examples in docs/agent_integration.md run as written against a real store
(in-process and through the real HTTP server)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from recall_shim import MemoryStore

from .conftest import ROOT, RunningServer, copy_store

DOC = ROOT / "docs" / "agent_integration.md"
STATE = {"user_id": "demo", "thread_id": "t-docs", "messages": [{"role": "user", "content": "喜欢什么输出方式"}]}


def example(name: str) -> str:
    found = re.findall(r"<!-- example: ([\w-]+) -->\s*```(\w+)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    blocks = {n: code for n, _, code in found}
    assert name in blocks, f"docs/agent_integration.md has no example {name!r} (has {sorted(blocks)})"
    return blocks[name]


def _landed(store: MemoryStore) -> str:
    return "".join(p.read_text() for p in store.paths.messages.glob("*.jsonl"))


def test_library_node_example(demo_store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the node remembers the user's turn: on a copy, so the shared store's later readers (which
    # recall landed messages at once: the hot tail) do not see it
    store = MemoryStore(copy_store(demo_store.paths.db, tmp_path / "store"))
    monkeypatch.setenv("AGENT_MEMORY_DB", str(store.paths.db))
    namespace: dict[str, Any] = {}
    exec(compile(example("library-node"), str(DOC), "exec"), namespace)
    update = namespace["memory_node"](dict(STATE))
    assert update["memory"].startswith("What you remember about this user")
    assert "简洁的输出" in update["memory"]
    assert '"session_id": "t-docs"' in _landed(store)
    namespace["store"].close()


def test_http_node_example(demo_store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore(copy_store(demo_store.paths.db, tmp_path / "store"))
    server = RunningServer(store.paths.db, tmp_path / "server.log")
    try:
        monkeypatch.setenv("AGENT_MEMORY_URL", server.url)
        monkeypatch.setenv("AGENT_MEMORY_TOKEN", server.token)
        namespace: dict[str, Any] = {}
        exec(compile(example("http-node"), str(DOC), "exec"), namespace)
        state = {**STATE, "thread_id": "t-docs-http"}
        update = namespace["memory_node_http"](state)
    finally:
        server.stop()
    assert "简洁的输出" in update["memory"]
    assert '"session_id": "t-docs-http"' in _landed(store)


def test_mcp_config_example_names_the_real_command() -> None:
    config = json.loads(example("mcp-config"))
    entry = config["mcpServers"]["agent-memory"]
    assert entry["command"] == "agent-memory" and entry["args"][:2] == ["mcp", "--db"]
    from recall_shim.interfaces.cli import build_parser

    args = build_parser().parse_args(entry["args"])
    assert args.command == "mcp" and args.db == entry["args"][2]
