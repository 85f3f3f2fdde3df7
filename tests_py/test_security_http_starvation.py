"""Attack class: one caller starving the others. The cost of one recall request is bounded
(413 past 8,000 query characters), a second `POST /build` while one runs gets 409 at once
instead of parking a worker thread, `/health` answers meanwhile, and slow clients are cut off:
a request head that does not arrive within --header-timeout closes the connection, a body that
does not arrive within --body-timeout gets 408. (The latency of a light caller under a heavy
one is measured by benchmarks/security_flood, not asserted here.)"""

from __future__ import annotations

import fcntl
from concurrent.futures import ThreadPoolExecutor, TimeoutError, as_completed
from typing import Iterator

import httpx
import pytest

from recall_shim import MemoryStore

from .conftest import RunningServer, raw_http


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("starve")
    running = RunningServer(folder / "store.duckdb", folder / "server.log",
                            args=["--header-timeout", "1", "--body-timeout", "1"])
    try:
        yield running
    finally:
        running.stop()


def test_one_request_cannot_ask_for_unbounded_recall_work(server: RunningServer) -> None:
    r = server.post("/recall-many", {"user_id": "u", "queries": ["the user likes tea " * 105] * 32})
    assert r.status_code == 413, r.text
    assert "at most 8000" in r.json()["error"]
    r = server.post("/prompt", {"user_id": "u", "queries": ["x" * 1999] * 5})
    assert r.status_code == 413, r.text


def test_a_slow_request_head_is_cut_off(server: RunningServer) -> None:
    # the head never ends: the server closes the connection (a hang would raise socket.timeout)
    assert raw_http(server.port, f"POST /recall HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n".encode()) == ""


def test_a_slow_body_gets_408(server: RunningServer) -> None:
    head = raw_http(server.port, f"POST /remember HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: "
                    f"Bearer {server.token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                    "{\"user_id\": ".encode())
    assert head.split(" ", 2)[1] == "408", head


def test_concurrent_builds_are_refused_not_queued(server: RunningServer) -> None:
    """Last in the module: it ends the server."""
    lock_path = MemoryStore(server.log_path.parent / "store.duckdb").paths.build_lock
    with open(lock_path, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a build elsewhere holds the store: the server's first build waits
        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(server.post, "/build", {}, timeout=30) for _ in range(8)]
            refused = []
            try:
                for f in as_completed(futures, timeout=40):
                    refused.append(f.result().status_code)
                    if len(refused) == 7:
                        break
            except TimeoutError:
                pass  # builds that queue instead of answering
            health = httpx.get(server.url + "/health", timeout=30)
            server.proc.kill()  # the one build still waits for the lock: end it here
    assert sorted(refused) == [409] * 7, refused
    assert health.status_code == 200
