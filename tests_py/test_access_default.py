"""What counts as using a memory (docs/recall.md "Access"): putting it into the agent's prompt
(``prompt``) is a use and is logged as an access (it reinforces at the next build); a look
(``recall``, ``recall_many``, the CLI listing) logs nothing unless the caller opts in with
``record_access=True`` / ``--record-access``. Every interface has the same default: the Python
API, the CLI, HTTP and MCP (the request schema is one module, requests.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import anyio
import pytest

from recall_shim import MemoryStore
from recall_shim.interfaces.requests import PromptRequest, RecallManyRequest, RecallRequest

from .conftest import RunningServer, copy_store
from .test_mcp import _session_calls

EXE = str(Path(sys.executable).with_name("agent-memory"))
Q = "喜欢什么输出方式"


def _events(store: MemoryStore) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(store.paths.access.glob("*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]


@pytest.fixture()
def store(demo_store: MemoryStore, tmp_path: Path) -> MemoryStore:
    """A copy of the built demo store: every test starts with the same access log."""
    return MemoryStore(copy_store(demo_store.paths.db, tmp_path / "copy"))


def test_the_request_schema_says_prompt_is_use_and_recall_is_a_look() -> None:
    assert RecallRequest(user_id="u", query="x").record_access is False
    assert RecallManyRequest(user_id="u", queries=["x"]).record_access is False
    assert PromptRequest(user_id="u", queries=["x"]).record_access is True


def test_python_api_defaults(store: MemoryStore) -> None:
    before = len(_events(store))
    assert store.recall(Q, user_id="demo", top_k=1, min_sim=0)
    assert store.recall_many([Q, "熟悉什么部署工具"], user_id="demo", top_k=1, min_sim=0)
    assert len(_events(store)) == before  # a look logs nothing
    assert store.prompt([Q], user_id="demo", top_k=1, min_sim=0, record_access=False)
    assert len(_events(store)) == before  # a prompt with the explicit opt-out
    block = store.prompt([Q], user_id="demo", top_k=1, min_sim=0)
    assert "简洁的输出" in block
    after_prompt = _events(store)
    assert len(after_prompt) == before + 1 and after_prompt[-1]["user_id"] == "demo"
    hit = store.recall(Q, user_id="demo", top_k=1, min_sim=0, record_access=True)[0]  # the opt-in
    assert _events(store)[-1]["memory_id"] == hit.memory_id and len(_events(store)) == before + 2


def _cli(db: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run([EXE, *args, "--db", str(db)], capture_output=True, text=True, input=stdin, timeout=600,
                         env={**os.environ, "OMP_WAIT_POLICY": "passive"})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_cli_defaults(store: MemoryStore) -> None:
    db = store.paths.db
    before = len(_events(store))
    _cli(db, "recall", Q, "--user", "demo", "--top-k", "1", "--min-sim", "0", "--json")
    _cli(db, "recall", "--batch", "-", "--top-k", "1", "--min-sim", "0",
         stdin=json.dumps({"user_id": "demo", "query": Q}) + "\n")
    _cli(db, "recall", Q, "--user", "demo", "--top-k", "1", "--min-sim", "0", "--prompt", "--no-access")
    _cli(db, "recall", "--batch", "-", "--no-access", "--top-k", "1", "--min-sim", "0",
         stdin=json.dumps({"user_id": "demo", "query": Q, "record_access": True}) + "\n")  # --no-access wins
    assert len(_events(store)) == before
    _cli(db, "recall", Q, "--user", "demo", "--top-k", "1", "--min-sim", "0", "--prompt")
    assert len(_events(store)) == before + 1
    _cli(db, "recall", Q, "--user", "demo", "--top-k", "1", "--min-sim", "0", "--record-access")
    _cli(db, "recall", "--batch", "-", "--top-k", "1", "--min-sim", "0",
         stdin=json.dumps({"user_id": "demo", "query": Q, "record_access": True}) + "\n")
    assert len(_events(store)) == before + 3


@pytest.fixture()
def served(store: MemoryStore, tmp_path: Path) -> Iterator[tuple[RunningServer, MemoryStore]]:
    server = RunningServer(store.paths.db, tmp_path / "server.log")
    try:
        yield server, store
    finally:
        server.stop()


def test_http_defaults(served: tuple[RunningServer, MemoryStore]) -> None:
    server, store = served
    before = len(_events(store))
    for path, body in (("/recall", {"query": Q}), ("/recall-many", {"queries": [Q]}),
                       ("/prompt", {"queries": [Q], "record_access": False})):
        r = server.post(path, {"user_id": "demo", "top_k": 1, "min_sim": 0, **body})
        assert r.status_code == 200, r.text
    assert len(_events(store)) == before
    r = server.post("/prompt", {"user_id": "demo", "queries": [Q], "top_k": 1, "min_sim": 0})
    assert r.status_code == 200 and "简洁的输出" in r.json()["prompt"]
    assert len(_events(store)) == before + 1
    r = server.post("/recall", {"user_id": "demo", "query": Q, "top_k": 1, "min_sim": 0, "record_access": True})
    assert r.status_code == 200 and len(_events(store)) == before + 2


def test_mcp_defaults(store: MemoryStore) -> None:
    before = len(_events(store))
    _, looks = anyio.run(_session_calls, store.paths.db, [
        ("recall", {"user_id": "demo", "query": Q, "top_k": 1, "min_sim": 0}),
        ("recall_many", {"user_id": "demo", "queries": [Q], "top_k": 1, "min_sim": 0}),
    ])
    assert not any(r.is_error for r in looks) and looks[0].structured_content["results"]
    assert len(_events(store)) == before
    _, uses = anyio.run(_session_calls, store.paths.db, [
        ("prompt", {"user_id": "demo", "queries": [Q], "top_k": 1, "min_sim": 0}),
    ])
    assert not uses[0].is_error and "简洁的输出" in uses[0].structured_content["prompt"]
    assert len(_events(store)) == before + 1
