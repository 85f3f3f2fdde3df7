"""Scoping: every recall path needs a user; agent_id / session_id narrow it further (API, CLI,
batch); analysts get per-user table macros, and every relation says whether it holds all users."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from recall_shim import InvalidQuery, MemoryStore

from .conftest import RunningServer, query

EXE = str(Path(sys.executable).with_name("agent-memory"))
TS = "2026-11-01 10:00:00"
RULE_KINDS = ["fact", "preference", "skill"]  # not episodes (whole messages), to compare contents


@pytest.fixture(scope="module")
def scoped(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    store = MemoryStore(tmp_path_factory.mktemp("scoped") / "store.duckdb")
    store.remember("ann", "I live in Lisbon.", session_id="trip", agent_id="travel-bot", ts=TS, message_id="a1")
    store.remember("ann", "I prefer window seats.", session_id="trip", agent_id="travel-bot", ts=TS, message_id="a2")
    store.remember("ann", "I have used Postgres.", session_id="work", agent_id="code-bot", ts=TS, message_id="a3")
    store.remember("ann", "I prefer window seats.", session_id="work", agent_id="code-bot", ts=TS, message_id="a4")
    store.remember("ben", "I live in Lisbon.", session_id="trip", agent_id="travel-bot", ts=TS, message_id="b1")
    store.build()
    return store


def _contents(store: MemoryStore, **scope: str) -> set[str]:
    return {m.content for m in store.recall("tell me about the user", user_id="ann", min_sim=-1, top_k=50,
                                            record_access=False, kinds=RULE_KINDS, **scope)}


def test_agent_and_session_narrow_the_user_scope(scoped: MemoryStore) -> None:
    assert _contents(scoped) == {"User lives in Lisbon", "User prefers window seats", "User has experience with Postgres"}
    assert _contents(scoped, agent_id="travel-bot") == {"User lives in Lisbon", "User prefers window seats"}
    assert _contents(scoped, session_id="work") == {"User prefers window seats", "User has experience with Postgres"}
    assert _contents(scoped, agent_id="code-bot", session_id="work") == {
        "User prefers window seats", "User has experience with Postgres"}
    # each filter holds on its own: some source message from the agent, some from the session
    assert _contents(scoped, agent_id="code-bot", session_id="trip") == {"User prefers window seats"}
    assert _contents(scoped, agent_id="no-such-agent") == set()
    # a narrower scope never widens the user scope: ben's identical memory stays ben's
    owners = dict(query(scoped, "select memory_id, user_id from long_term_memory"))
    hits = scoped.recall("Lisbon", user_id="ann", session_id="trip", min_sim=-1, record_access=False)
    assert hits and {owners[m.memory_id] for m in hits} == {"ann"}
    with pytest.raises(InvalidQuery, match="agent_id"):
        scoped.recall("x", user_id="ann", agent_id="")
    with pytest.raises(InvalidQuery, match="session_id"):
        scoped.recall("x", user_id="ann", session_id=" trip")


def test_there_is_no_all_users_recall(scoped: MemoryStore) -> None:
    for bad in (None, "", "   ", ["ann", "ben"], "*", "%"):
        if bad in ("*", "%"):  # wildcards are ordinary (unknown) user ids, never patterns
            assert scoped.recall("Lisbon", user_id=bad, min_sim=-1, record_access=False) == []  # type: ignore[arg-type]
            continue
        with pytest.raises(InvalidQuery, match="user_id"):
            scoped.recall("Lisbon", user_id=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidQuery, match="user_id"):
        scoped.prompt(["Lisbon"], user_id="")
    out = subprocess.run([EXE, "recall", "Lisbon", "--db", str(scoped.paths.db)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2 and "--user is required" in out.stderr


def test_cli_scopes(scoped: MemoryStore, tmp_path: Path) -> None:
    db = str(scoped.paths.db)
    out = subprocess.run([EXE, "recall", "tell me about the user", "--user", "ann", "--agent", "code-bot",
                          "--session", "work", "--min-sim", "-1", "--json", "--no-access", "--db", db,
                          "--kind", "fact", "--kind", "preference", "--kind", "skill"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert {m["content"] for m in json.loads(out.stdout)} == {"User prefers window seats",
                                                              "User has experience with Postgres"}
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"id": 1, "user_id": "ann", "query": "where", "agent_id": "travel-bot",
                                 "min_sim": -1, "top_k": 10, "kinds": RULE_KINDS}) + "\n"
                     + json.dumps({"id": 2, "query": "where"}) + "\n")
    out = subprocess.run([EXE, "recall", "--batch", str(batch), "--no-access", "--db", db], capture_output=True,
                         text=True, timeout=300)
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert {m["content"] for m in lines[0]["results"]} == {"User lives in Lisbon", "User prefers window seats"}
    assert "user_id is required" in lines[1]["error"] and out.returncode == 1


def test_http_server_requires_a_user_and_takes_narrower_scopes(scoped: MemoryStore, tmp_path: Path) -> None:
    server = RunningServer(scoped.paths.db, tmp_path / "server.log")
    try:
        body = {"user_id": "ann", "query": "where", "min_sim": -1, "top_k": 10, "kinds": RULE_KINDS,
                "record_access": False}
        r = server.post("/recall", {**body, "agent_id": "travel-bot"})
        assert r.status_code == 200, r.text
        assert {m["content"] for m in r.json()["results"]} == {"User lives in Lisbon", "User prefers window seats"}
        r = server.post("/recall", {**body, "session_id": "work"})
        assert {m["content"] for m in r.json()["results"]} == {"User prefers window seats",
                                                                "User has experience with Postgres"}
        no_user = {k: v for k, v in body.items() if k != "user_id"}
        r = server.post("/recall", no_user)
        assert r.status_code == 422 and "user_id" in r.json()["error"]
        r = server.post("/recall", {**body, "user_id": " ann"})
        assert r.status_code == 400 and "whitespace" in r.json()["error"]
    finally:
        server.stop()


def test_analyst_views_are_per_user_or_marked_all_users(scoped: MemoryStore) -> None:
    con = duckdb.connect(str(scoped.paths.db), read_only=True)
    try:
        for macro, table in (("user_memories", "long_term_memory"), ("user_messages", "session_messages"),
                             ("user_rejects", "session_log_rejects"), ("user_archived_memories", "memory_archive")):
            per_user = con.execute(f"select user_id from {macro}('ann')").fetchall()
            total = con.execute(f"select count(*) from {table} where user_id = 'ann'").fetchone()[0]
            assert len(per_user) == total and {u for (u,) in per_user} <= {"ann"}
        assert con.execute("select count(*) from user_memories('ann') where kind != 'episode'").fetchone()[0] == 3
        comments = dict(con.execute("select table_name, comment from duckdb_tables()").fetchall())
    finally:
        con.close()
    for table in ("long_term_memory", "session_messages", "session_log", "memory_archive", "stg_recall_events",
                  "memory_strength_history", "int_memory_embeddings"):
        assert comments[table].startswith("ALL USERS"), table
    assert comments["recall_queries"] == "no per-user data"
    manifest = json.loads((scoped.paths.dbt_dir / "target" / "manifest.json").read_text())
    for node in manifest["nodes"].values():
        if node["resource_type"] in ("model", "seed", "snapshot"):
            assert node["config"]["meta"].get("user_scope") in ("all_users", "none"), node["name"]
