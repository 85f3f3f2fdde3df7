"""Forget is scoped to one user under colliding message ids, and what it forgets stays forgotten
(docs/data_protection.md, "Identity: per-user message ids, collision-free memory ids"): every
memory derived from a forgotten message is tombstoned, a replayed row (same user and
message_id) is dropped at the build, and `ingest --force` of the original log after
`forget --user` does not bring the user back. One store for the module: the scenario runs once
in the fixture (ingest, build, forget the memory, forget the user, scans, replays, build) and
the tests read what it recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from recall_shim import MemoryStore

from .conftest import query

TS = "2026-11-01 10:00:00"
MARKER = "Zqalicesecretvalley"      # only in alice's content
CAROL_MARKER = "zqcarolforgottentea"  # only in carol's forgotten message


def log_rows() -> list[dict[str, Any]]:
    """alice and bob number their messages "1", "2" per session; carol has one message with a
    preference and an episode (two memories of one message)."""
    return [
        {"user_id": "alice", "session_id": "s1", "msg_seq": 1, "role": "user", "ts": TS, "message_id": "1",
         "content": f"I live in {MARKER}."},
        {"user_id": "alice", "session_id": "s1", "msg_seq": 2, "role": "user", "ts": TS, "message_id": "2",
         "content": f"I prefer {MARKER.lower()}tea every single morning."},
        {"user_id": "bob", "session_id": "s1", "msg_seq": 1, "role": "user", "ts": TS, "message_id": "1",
         "content": "I live in Zqbobharbour."},
        {"user_id": "bob", "session_id": "s1", "msg_seq": 2, "role": "user", "ts": TS, "message_id": "2",
         "content": "I prefer zqbobcocoa after long walks."},
        {"user_id": "carol", "session_id": "c1", "msg_seq": 1, "role": "user", "ts": TS, "message_id": "1",
         "content": f"I prefer {CAROL_MARKER} with lemon and ginger."},
        {"user_id": "carol", "session_id": "c1", "msg_seq": 2, "role": "user", "ts": TS, "message_id": "2",
         "content": "I live in Zqcarolkept."},
    ]


def store_files(store: MemoryStore) -> list[Path]:
    """The warehouse, the inbox and the serving folder: every file holding store data."""
    p = store.paths
    files = [f for f in (p.db, Path(str(p.db) + ".wal")) if f.is_file()]
    for folder in (p.inbox, p.serving):
        files.extend(f for f in folder.rglob("*") if f.is_file())
    return files


def files_with(store: MemoryStore, marker: str) -> list[str]:
    needles = {marker.encode(), marker.lower().encode(), json.dumps(marker)[1:-1].encode()}
    return [str(f) for f in store_files(store) if any(n in f.read_bytes() for n in needles)]


def messages(store: MemoryStore, user: str) -> list[tuple]:
    return query(store, "select message_id, content from session_messages where user_id = ? order by all", [user])


def memories(store: MemoryStore, user: str) -> list[tuple]:
    return query(store, "select kind, content from long_term_memory where user_id = ? order by all", [user])


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("forget_scope")
    log = tmp / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in log_rows()))
    store = MemoryStore(tmp / "store.duckdb")
    store.ingest(log)
    store.build()
    out: dict[str, Any] = {"store": store}
    out["bob_before"] = (messages(store, "bob"), memories(store, "bob"))
    out["carol_before"] = memories(store, "carol")
    out["files_before"] = files_with(store, MARKER)

    carol_pref = query(store, "select memory_id from long_term_memory where content like ?",
                       [f"%{CAROL_MARKER}%"])
    out["forget_memory"] = store.forget(memory_id=[m for (m,) in carol_pref if m][0], user_id="carol")
    out["forget_user"] = store.forget(user_id="alice").as_dict()
    out["files_after_forget"] = files_with(store, MARKER)
    out["bob_after_forget"] = (messages(store, "bob"), memories(store, "bob"))
    store.build()  # an incremental build after the forgets must succeed
    out["files_after_build"] = files_with(store, MARKER)

    # replays: carol's forgotten row sent again as it was, and the whole original log forced in
    store.remember_many([r for r in log_rows() if r["user_id"] == "carol" and r["message_id"] == "1"])
    assert store.ingest(log, force=True).rows == len(log_rows())  # what `ingest --force` does
    store.remember("alice", "I live in Zqalicenewtown.", ts=TS, message_id="after-forget")
    store.build()
    return out


def test_forget_user_touches_only_that_user(scenario: dict[str, Any]) -> None:
    store = scenario["store"]
    assert scenario["bob_before"][0] == [("1", "I live in Zqbobharbour."), ("2", "I prefer zqbobcocoa after long walks.")]
    assert scenario["bob_after_forget"] == scenario["bob_before"]
    assert scenario["forget_user"]["removed"]["landing:messages"] == 2
    # after the replays bob still has exactly his two messages (the forced copies are duplicates)
    assert messages(store, "bob") == scenario["bob_before"][0]
    assert memories(store, "bob") == scenario["bob_before"][1]
    assert {r[0] for r in query(store, "select reject_reason from session_log_rejects where user_id = 'bob'")} == {
        "duplicate_message_id"}


def test_forget_memory_tombstones_every_derived_memory(scenario: dict[str, Any]) -> None:
    store = scenario["store"]
    rep = scenario["forget_memory"]
    kinds_before = {k for k, c in scenario["carol_before"] if CAROL_MARKER in c}
    assert kinds_before == {"preference", "episode"} and rep.memories == 2
    stones = [json.loads(line) for f in sorted(store.paths.forget.glob("*.jsonl")) for line in f.read_text().splitlines()]
    carol = [s for s in stones if s["user_id"] == "carol"]
    assert {s["scope"] for s in carol} == {"memory", "message"}
    assert len([s for s in carol if s["scope"] == "memory"]) == 2
    assert [(s["user_id"], s["message_id"]) for s in carol if s["scope"] == "message"] == [("carol", "1")]
    # the replayed row and the forced log brought neither memory back, and no reject with content
    assert all(CAROL_MARKER not in c for _, c in memories(store, "carol"))
    assert messages(store, "carol") == [("2", "I live in Zqcarolkept.")]
    assert query(store, "select count(*) from session_log where content like ?", [f"%{CAROL_MARKER}%"])[0][0] == 0
    assert query(store, "select count(*) from session_log_rejects where content like ?", [f"%{CAROL_MARKER}%"])[0][0] == 0


def test_forgotten_user_does_not_come_back(scenario: dict[str, Any]) -> None:
    store = scenario["store"]
    assert scenario["files_before"], "the scan finds the marker before the forget"
    assert scenario["files_after_forget"] == [] and scenario["files_after_build"] == []
    # ingest --force of the original log: alice's old messages are dropped at the build; a
    # genuinely new message (new message_id) after the forget is remembered
    assert messages(store, "alice") == [("after-forget", "I live in Zqalicenewtown.")]
    assert query(store, "select count(*) from session_log where content like ?", [f"%{MARKER}%"])[0][0] == 0
    assert query(store, "select count(*) from session_log_rejects where user_id = 'alice'")[0][0] == 0
    warehouse_and_serving = [f for f in files_with(store, MARKER) if ".inbox" not in f]
    assert warehouse_and_serving == []
    assert store.recall("where does the user live?", user_id="alice", min_sim=-1, top_k=20,
                        record_access=False, kinds=["fact"])[0].content == "User lives in Zqalicenewtown"
