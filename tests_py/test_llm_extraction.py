"""LLM extraction against a local HTTP server that speaks the OpenAI chat-completions protocol.

The fake endpoint answers deterministically: every message it is sent becomes a fact
"LLM: <text>" sourced from that message, plus two items that must be rejected (an unknown kind
and a source id that was not in the batch). Real dbt builds call it from the Python model.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from recall_shim import MemoryStore
from recall_shim.build.llm import LLMConfig, Message, chat_completions_url, make_batches, parse_memories

from .conftest import query


class FakeLLM:
    def __init__(self) -> None:
        self.mode = "ok"  # ok | fail (HTTP 500) | slow (answers after 3 s)
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                       "body": body, "mode": outer.mode})
                if outer.mode == "fail":
                    self._send(500, {"error": {"message": "model overloaded"}})
                    return
                if outer.mode == "slow":
                    time.sleep(3)
                batch = json.loads(body["messages"][1]["content"])
                memories: list[dict[str, Any]] = [
                    {"kind": "fact", "content": f"LLM: {m['text']}", "source_message_ids": [m["id"]], "slot": None}
                    for m in batch["messages"]
                ]
                memories.append({"kind": "opinion", "content": "not a kind", "source_message_ids": [batch["messages"][0]["id"]]})
                memories.append({"kind": "fact", "content": "made up", "source_message_ids": ["not-in-batch"]})
                content = "```json\n" + json.dumps({"memories": memories}, ensure_ascii=False) + "\n```"
                self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 100 * len(batch["messages"]), "completion_tokens": 7,
                              "total_tokens": 100 * len(batch["messages"]) + 7},
                })

            def _send(self, status: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def fake_llm() -> Iterator[FakeLLM]:
    server = FakeLLM()
    try:
        yield server
    finally:
        server.close()


def _messages(store: MemoryStore) -> None:
    rows = [
        ("u1", "s1", 1, "user", "I live in Oslo.", "2026-11-20 08:00:00", "u1-1"),
        ("u1", "s1", 2, "assistant", "Noted.", "2026-11-20 08:00:05", "u1-2"),
        ("u1", "s1", 3, "user", "Tuesdays I swim in the fjord", "2026-11-20 08:01:00", "u1-3"),
        ("u1", "s1", 4, "user", "My sister runs a bakery in Bergen", "2026-11-20 08:02:00", "u1-4"),
        ("u2", "s2", 1, "user", "我每天早上跑步", "2026-11-20 09:00:00", "u2-1"),
    ]
    store.remember_many([dict(zip(("user_id", "session_id", "msg_seq", "role", "content", "ts", "message_id"), r))
                         for r in rows])


LLM_VARS = {"llm_batch_size": 2, "llm_max_retries": 1, "llm_retry_backoff_seconds": 0, "llm_timeout_seconds": 1}


def test_failed_batches_are_retried_next_build_and_tokens_are_ledgered(
    fresh_store: MemoryStore, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_LLM_URL", fake_llm.url)
    monkeypatch.setenv("AGENT_MEMORY_LLM_MODEL", "tiny-test-model")
    monkeypatch.setenv("AGENT_MEMORY_LLM_KEY", "sk-test")
    _messages(fresh_store)

    # Build 1: the endpoint fails. The build passes, rule extraction still runs, nothing is lost.
    fake_llm.mode = "fail"
    fresh_store.build(vars=LLM_VARS)
    # u1 has 3 user messages (batch of 2 + batch of 1), u2 one: 3 batches x (1 try + 1 retry)
    assert len(fake_llm.requests) == 6
    assert {r["path"] for r in fake_llm.requests} == {"/v1/chat/completions"}
    assert {r["auth"] for r in fake_llm.requests} == {"Bearer sk-test"}
    assert {r["body"]["model"] for r in fake_llm.requests} == {"tiny-test-model"}
    sent = [m["id"] for r in fake_llm.requests[::2] for m in json.loads(r["body"]["messages"][1]["content"])["messages"]]
    assert sent == ["u1-1", "u1-3", "u1-4", "u2-1"]  # user messages only, one user per batch
    failed = query(fresh_store, "select status, attempts, error from int_llm_extraction_batches")
    assert len(failed) == 3 and all(s == "failed" and a == 2 and "HTTP 500" in e for s, a, e in failed)
    assert query(fresh_store, "select content from long_term_memory where user_id = 'u1' and kind != 'episode'") == [
        ("User lives in Oslo",)]
    ledger1 = query(fresh_store, "select batches_failed, requests, prompt_tokens, completion_tokens from llm_token_ledger")
    assert ledger1 == [(3, 6, 0, 0)]

    # Build 2: the endpoint answers. The failed batches are sent again and their memories land.
    fake_llm.mode = "ok"
    fresh_store.build(vars=LLM_VARS)
    assert len(fake_llm.requests) == 9
    mems = dict(query(fresh_store, "select content, source_message_ids from long_term_memory where content like 'LLM:%'"))
    assert mems == {"LLM: I live in Oslo.": ["u1-1"], "LLM: Tuesdays I swim in the fjord": ["u1-3"],
                    "LLM: My sister runs a bakery in Bergen": ["u1-4"], "LLM: 我每天早上跑步": ["u2-1"]}
    assert query(fresh_store, "select user_id from long_term_memory where content = 'LLM: 我每天早上跑步'") == [("u2",)]
    rules = query(fresh_store, "select distinct rule_id from int_memories_llm_extracted")
    assert rules == [("llm:tiny-test-model",)]
    rejected = query(fresh_store, "select rejected_json from int_llm_extraction_batches where status = 'ok'")
    reasons = sorted(x["reason"] for (doc,) in rejected for x in json.loads(doc))
    assert reasons == ["no_valid_source_message"] * 3 + ["unknown_kind"] * 3
    ledger = query(fresh_store, "select batches_ok, batches_failed, messages_sent, memories_kept, memories_rejected,"
                                " prompt_tokens, completion_tokens from llm_token_ledger order by built_at")
    assert ledger[0] == (0, 3, 4, 0, 0, 0, 0)
    assert ledger[1] == (3, 0, 4, 4, 6, 400, 21)

    # Build 3: three new messages of u1 (two batches), the env URL gone: turned on through the dbt
    # var alone, the endpoint too slow. Nothing of an ok batch is sent again, one batch per build
    # is sent (the rest wait), and it fails with a timeout.
    monkeypatch.delenv("AGENT_MEMORY_LLM_URL")
    fresh_store.remember_many([
        {"user_id": "u1", "session_id": "s3", "msg_seq": i, "role": "user", "content": text,
         "ts": f"2026-11-21 08:0{i}:00", "message_id": f"u1-{4 + i}"}
        for i, text in enumerate(["I own a red kayak", "My cat is called Mia", "I read before bed"], start=1)])
    fake_llm.mode = "slow"
    fresh_store.build(vars={**LLM_VARS, "llm_url": fake_llm.url + "/v1", "llm_max_retries": 0,
                            "llm_max_batches_per_build": 1})
    assert len(fake_llm.requests) == 10
    assert [m["id"] for m in json.loads(fake_llm.requests[-1]["body"]["messages"][1]["content"])["messages"]] == [
        "u1-5", "u1-6"]
    rows = query(fresh_store, "select status, attempts, error, message_ids from int_llm_extraction_batches"
                              " where attempted_at = (select max(attempted_at) from int_llm_extraction_batches)")
    assert rows == [("failed", 1, "timed out after 1s", ["u1-5", "u1-6"])]
    assert query(fresh_store, "select count(*) from long_term_memory where content like 'LLM:%'") == [(4,)]
    recalled = fresh_store.recall("what does the user do on Tuesdays?", user_id="u1", min_sim=0, record_access=False)
    assert recalled[0].content == "LLM: Tuesdays I swim in the fjord"
    # the Python model ran incrementally in builds 2 and 3: dbt-duckdb wrote each run's rows to a
    # table <model>__dbt_tmp<time> and left it; the model's post-hook drops them
    assert query(fresh_store, "select table_name from duckdb_tables() where table_name like '%dbt_tmp%'") == []
    assert query(fresh_store, "select count(*) from int_llm_extraction_batches") == [(7,)]


def test_off_by_default(fresh_store: MemoryStore, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_MEMORY_LLM_URL", raising=False)
    _messages(fresh_store)
    fresh_store.build(vars=LLM_VARS)  # LLM_VARS set no llm_url: the other builds' vars, one parse
    assert fake_llm.requests == []
    assert query(fresh_store, "select count(*) from int_llm_extraction_batches") == [(0,)]
    assert query(fresh_store, "select count(*) from long_term_memory where user_id = 'u1' and kind != 'episode'") == [(1,)]


def test_reply_parsing_and_batching(monkeypatch: pytest.MonkeyPatch) -> None:
    kept, rejected = parse_memories(
        '{"memories": [{"kind": "Preference", "content": "  User likes  tea ", "source_message_ids": "m1"},'
        ' {"kind": "skill", "content": "", "source_message_ids": ["m1"]},'
        ' {"kind": "fact", "content": "x", "source_message_ids": ["m1"], "slot": "Home City!"},'
        ' "just text"]}',
        ["m1"], ("fact", "preference", "skill"))
    assert kept == [{"kind": "preference", "content": "User likes tea", "slot": None, "source_message_ids": ["m1"]}]
    assert [r["reason"] for r in rejected] == ["empty_content", "invalid_slot", "not_an_object"]
    with pytest.raises(ValueError, match="not JSON"):
        parse_memories("Sure! Here are the memories:", ["m1"], ("fact",))
    assert chat_completions_url("http://h:11434") == "http://h:11434/v1/chat/completions"
    assert chat_completions_url("http://h/v1/") == "http://h/v1/chat/completions"
    assert chat_completions_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"
    msgs = [Message(f"m{i}", u, "t") for i, u in enumerate(["a", "a", "a", "b", "a"])]
    assert [[m.message_id for m in b] for b in make_batches(msgs, 2)] == [["m0", "m1"], ["m2"], ["m3"], ["m4"]]
    monkeypatch.delenv("AGENT_MEMORY_LLM_URL", raising=False)
    assert LLMConfig.resolve({"llm_url": ""}).enabled is False
    monkeypatch.setenv("AGENT_MEMORY_LLM_URL", "http://h:11434")
    monkeypatch.setenv("AGENT_MEMORY_LLM_KEY", "sk-x")
    cfg = LLMConfig.resolve({"llm_url": "", "llm_batch_size": 5})
    assert cfg.enabled and cfg.url == "http://h:11434" and cfg.key == "sk-x" and cfg.batch_size == 5
    assert LLMConfig.resolve({"llm_url": "http://other"}).url == "http://other"


def test_unreachable_endpoint_fails_the_batch_not_the_build() -> None:
    from recall_shim.build.llm import extract_batch

    cfg = LLMConfig(url="http://127.0.0.1:9", model="m", max_retries=1, retry_backoff_seconds=0, timeout_seconds=2)
    res = extract_batch(cfg, [Message("m1", "u", "hello")], sleep=lambda s: None)
    assert res.status == "failed" and res.attempts == 2 and "cannot reach the endpoint" in res.error
