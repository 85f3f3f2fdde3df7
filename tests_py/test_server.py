"""The HTTP server: the real `agent-memory serve` on loopback, called with a real HTTP client."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import httpx
import pytest

from recall_shim import MemoryStore

from .conftest import DEMO_LOG, RunningServer, query

SEED_QUESTIONS = ["喜欢什么输出方式", "做过什么数据分析", "熟悉什么部署工具"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, MemoryStore]]:
    folder = tmp_path_factory.mktemp("served")
    store = MemoryStore(folder / "store.duckdb")
    store.ingest(DEMO_LOG)
    store.build()
    server = RunningServer(store.paths.db, folder / "server.log")
    try:
        yield server, store
    finally:
        server.stop()


def post(server: RunningServer, path: str, body: object) -> httpx.Response:
    return server.post(path, body)


def test_health_and_openapi(served: tuple[RunningServer, MemoryStore]) -> None:
    server, store = served
    health = httpx.get(server.url + "/health", headers=server.headers).json()
    assert health["status"] == "ok" and health["ready"] is True
    assert "db" not in health and health["embedding_dim"] == 384
    assert health["snapshot"].startswith("snap-")
    spec = httpx.get(server.url + "/openapi.json", headers=server.headers).json()
    assert {"/health", "/remember", "/ingest", "/recall", "/recall-many", "/prompt", "/forget", "/build"} <= set(spec["paths"])
    recall_body = spec["paths"]["/recall"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert recall_body["$ref"].endswith("/RecallRequest")
    assert "user_id" in spec["components"]["schemas"]["RecallRequest"]["required"]


def test_recall_and_recall_many(served: tuple[RunningServer, MemoryStore]) -> None:
    server, store = served
    r = post(server, "/recall", {"user_id": "demo", "query": "喜欢什么输出方式", "top_k": 2, "min_sim": 0,
                                 "record_access": False})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert len(results) == 2 and "简洁的输出" in results[0]["content"]
    assert results[0]["source_message_ids"] == ["demo-s1-1"]
    # the same memories, field for field, as the library (and the CLI and MCP: as_dict) give them
    lib = [m.as_dict() for m in store.recall("喜欢什么输出方式", user_id="demo", top_k=2, min_sim=0, record_access=False)]
    assert results == lib and "lexical_score" in results[0]
    r = post(server, "/recall-many", {"user_id": "demo", "queries": SEED_QUESTIONS, "top_k": 1, "min_sim": 0,
                                      "record_access": False, "kinds": ["preference", "fact", "skill"]})
    assert r.status_code == 200, r.text
    assert [g[0]["kind"] for g in r.json()["results"]] == ["preference", "fact", "skill"]
    only_skill = post(server, "/recall", {"user_id": "demo", "query": "喜欢什么输出方式", "kinds": ["skill"],
                                          "min_sim": -1, "record_access": False}).json()["results"]
    assert only_skill and {m["kind"] for m in only_skill} == {"skill"}
    assert post(server, "/recall", {"user_id": "nobody", "query": "x", "record_access": False}).json()["results"] == []
    p = post(server, "/prompt", {"user_id": "demo", "queries": SEED_QUESTIONS, "top_k": 1, "min_sim": 0,
                                 "record_access": False, "kinds": ["preference", "fact", "skill"]})
    assert p.status_code == 200 and "Preferences:" in p.json()["prompt"] and "Skills:" in p.json()["prompt"]


def test_bad_requests_get_4xx_with_a_clear_message(served: tuple[RunningServer, MemoryStore], tmp_path: Path) -> None:
    server, _ = served
    cases = [
        ("/recall", {"user_id": "demo"}, 400, "exactly one of query"),
        ("/recall", {"user_id": "demo", "query": "   "}, 400, "empty"),
        ("/recall", {"user_id": "demo", "vector": [0.85, 0.15, 0.2, 0.05]}, 400, "4 dimensions, the store uses 384"),
        ("/recall", {"user_id": "demo", "query": "x", "top_k": 0}, 400, "top_k must be"),
        ("/recall", {"query": "x"}, 422, "user_id is required"),
        ("/recall", {"user_id": "demo", "query": "x", "colour": "red"}, 422, "colour"),
        ("/recall-many", {"user_id": "demo", "queries": []}, 422, "queries"),
        ("/remember", {"user_id": "demo", "content": ""}, 422, "content"),
        ("/ingest", {"rows": []}, 422, "rows"),
        ("/forget", {}, 400 if _has_forget() else 501, "forget" if not _has_forget() else "user_id"),
    ]
    for path, body, status, message in cases:
        r = post(server, path, body)
        assert r.status_code == status, (path, body, r.text)
        assert message in r.json()["error"], (path, body, r.json())
    r = httpx.post(server.url + "/recall", content=b"{not json",
                   headers={"content-type": "application/json", **server.headers})
    assert r.status_code == 422 and "not valid JSON" in r.json()["error"]
    r = httpx.get(server.url + "/no-such-route", headers=server.headers)
    assert r.status_code == 404 and r.json()["error"]


def _has_forget() -> bool:
    return callable(getattr(MemoryStore, "forget", None))


def test_unbuilt_store_answers_409(tmp_path: Path) -> None:
    server = RunningServer(tmp_path / "empty.duckdb", tmp_path / "server.log")
    try:
        health = httpx.get(server.url + "/health", headers=server.headers).json()
        assert health["ready"] is False and "agent-memory build" in health["detail"]
        r = post(server, "/recall", {"user_id": "demo", "query": "x"})
        assert r.status_code == 409 and "agent-memory build" in r.json()["error"]
        assert r.json()["type"] == "StoreNotBuilt"
    finally:
        server.stop()


def test_writes_land_and_a_build_beside_the_server_is_served(served: tuple[RunningServer, MemoryStore]) -> None:
    server, store = served
    before = httpx.get(server.url + "/health", headers=server.headers).json()["snapshot"]
    r = post(server, "/remember", {"user_id": "carol", "content": "I live in Oslo.", "session_id": "c1",
                                   "msg_seq": 1, "ts": "2026-11-20 08:00:00", "message_id": "carol-c1-1"})
    assert r.status_code == 202 and r.json()["message_id"] == "carol-c1-1"
    r = post(server, "/ingest", {"rows": [
        {"user_id": "carol", "session_id": "c1", "msg_seq": 2, "role": "user", "content": "I prefer answers in Norwegian.",
         "ts": "2026-11-20 08:01:00", "message_id": "carol-c1-2"},
        {"user_id": None, "session_id": "c1", "msg_seq": 3, "role": "user", "content": "no user here",
         "ts": "2026-11-20 08:02:00", "message_id": "carol-c1-3"},
    ]})
    assert r.status_code == 202 and r.json()["rows"] == 2
    # The server holds no lock on the warehouse: a build in another process runs while it serves.
    store.build()
    r = post(server, "/recall", {"user_id": "carol", "query": "Where does the user live?", "min_sim": 0,
                                 "record_access": False})
    assert r.status_code == 200, r.text
    assert r.json()["snapshot"] != before
    contents = [m["content"] for m in r.json()["results"]]
    assert "User lives in Oslo" in contents and "User prefers answers in Norwegian" in contents
    rejects = query(store, "select message_id, reject_reason from session_log_rejects where message_id = 'carol-c1-3'")
    assert rejects == [("carol-c1-3", "null_user")]


def test_build_endpoint_publishes_a_snapshot(served: tuple[RunningServer, MemoryStore]) -> None:
    server, _ = served
    r = post(server, "/build", {})
    assert r.status_code == 200, r.text
    assert r.json()["snapshot"].startswith("snap-")
    assert httpx.get(server.url + "/health", headers=server.headers).json()["snapshot"] == r.json()["snapshot"]
    bad = post(server, "/build", {"vars": "not an object"})
    assert bad.status_code == 422 and "vars" in bad.json()["error"]


@pytest.mark.skipif(not _has_forget(), reason="MemoryStore.forget is not in this version")
def test_forget_endpoint(served: tuple[RunningServer, MemoryStore]) -> None:
    server, store = served
    hit = post(server, "/recall", {"user_id": "carol", "query": "Where does the user live?", "min_sim": 0,
                                   "record_access": False}).json()["results"]
    assert hit, "test_writes_land... must run first (same module)"
    r = post(server, "/forget", {"memory_id": hit[0]["memory_id"], "actor": "test"})
    assert r.status_code == 200, r.text
    store.build()
    after = post(server, "/recall", {"user_id": "carol", "query": "Where does the user live?", "min_sim": 0,
                                     "record_access": False}).json()["results"]
    assert hit[0]["memory_id"] not in [m["memory_id"] for m in after]


def test_unknown_kinds_are_an_error_listing_the_known_ones(served: tuple[RunningServer, MemoryStore]) -> None:
    server, _ = served
    for path, body in (("/recall", {"user_id": "demo", "query": "x", "kinds": ["skills"]}),
                       ("/prompt", {"user_id": "demo", "queries": ["x"], "kinds": ["skill", "opinion"]})):
        r = post(server, path, {**body, "record_access": False})
        assert r.status_code == 400, r.text
        assert "the kinds are fact, preference, skill, episode, assistant" in r.json()["error"], r.json()
    assert "unknown kind 'opinion'" in r.json()["error"]


@pytest.mark.skipif(not _has_forget(), reason="MemoryStore.forget is not in this version")
def test_forgetting_a_missing_memory_reports_nothing_removed(served: tuple[RunningServer, MemoryStore]) -> None:
    server, _ = served
    for body in ({"memory_id": "mem2_no_such_memory"}, {"memory_id": "mem2_no_such_memory", "user_id": "demo"}):
        r = post(server, "/forget", body)
        assert r.status_code == 200, r.text
        rep = r.json()["forgotten"]
        assert (rep["found"], rep["memories"], rep["messages"]) == (False, 0, 0), rep
