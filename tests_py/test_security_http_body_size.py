"""Attack class: oversized request bodies. The server refuses a body over its limit with 413 and
a JSON error while reading it (a declared Content-Length over the limit before a byte of the body
is read, a chunked body as soon as it passes the limit); the limit is a flag (--max-body-bytes)."""

from __future__ import annotations

import json
from typing import Iterator

import httpx
import pytest

from .conftest import RunningServer, raw_http

LIMIT = 65_536


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("body")
    running = RunningServer(folder / "store.duckdb", folder / "server.log", args=["--max-body-bytes", str(LIMIT)])
    try:
        yield running
    finally:
        running.stop()


def _landed(server: RunningServer) -> str:
    inbox = server.log_path.parent / "store.inbox" / "messages"
    return "".join(p.read_text() for p in inbox.glob("*.jsonl")) if inbox.exists() else ""


def test_a_34_mb_content_gets_413_and_lands_nothing(server: RunningServer) -> None:
    r = server.post("/remember", {"user_id": "u1", "content": "x" * 34_000_000})
    assert r.status_code == 413, r.status_code
    assert str(LIMIT) in r.json()["error"]
    assert "x" * 1000 not in _landed(server)
    ok = server.post("/remember", {"user_id": "u1", "content": "I like tea.", "message_id": "small-1"})
    assert ok.status_code == 202, ok.text  # under the limit: accepted as before


def test_chunked_body_is_cut_off_at_the_limit(server: RunningServer) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"user_id": "u2", "content": "'
        for _ in range(64):
            yield b"y" * 4096
        yield b'"}'

    r = httpx.post(server.url + "/remember", content=chunks(), timeout=60,
                   headers={**server.headers, "content-type": "application/json"})
    assert r.status_code == 413 and "error" in r.json()


def test_declared_length_over_the_limit_is_refused_before_the_body(server: RunningServer) -> None:
    head = raw_http(server.port, f"POST /ingest HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: "
                    f"Bearer {server.token}\r\nContent-Type: application/json\r\nContent-Length: 500000000\r\n\r\n"
                    .encode())  # no body sent: the answer must come anyway
    status = head.split(" ", 2)[1]
    assert status == "413", head
    assert "error" in json.loads(head.split("\r\n\r\n", 1)[1])



def test_content_over_max_content_chars_gets_413_under_the_body_limit(server: RunningServer) -> None:
    # 20,001 characters: under the body limit, over the store's var max_content_chars (20,000)
    r = server.post("/remember", {"user_id": "u3", "content": "z" * 20_001, "message_id": "long-1"})
    assert r.status_code == 413, (r.status_code, r.text)
    assert "max_content_chars" in r.json()["error"] or "20000" in r.json()["error"].replace(",", "")
    assert "z" * 1000 not in _landed(server)
