"""Bad input is kept with its reason and never breaks the build; every format lands."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb

from recall_shim import MemoryStore

from .conftest import query

GOOD = {"user_id": "u1", "session_id": "s1", "role": "user", "ts": "2026-11-01 10:00:00"}


def _rows() -> list[dict]:
    return [
        {**GOOD, "msg_seq": 1, "content": "I prefer dark mode.", "message_id": "ok-1"},
        {**GOOD, "msg_seq": 2, "content": "I live in Oslo.", "message_id": "ok-2"},
        {**GOOD, "msg_seq": 3, "content": "", "message_id": "bad-empty"},
        {**GOOD, "msg_seq": 4, "content": "   \t\n", "message_id": "bad-blank"},
        {**GOOD, "msg_seq": 5, "content": "hello", "role": "robot", "message_id": "bad-role"},
        {**GOOD, "msg_seq": 6, "content": "no user", "user_id": None, "message_id": "bad-user"},
        {**GOOD, "msg_seq": 7, "content": "dup of ok-1", "message_id": "ok-1"},
        {**GOOD, "msg_seq": 8, "content": "from the future", "ts": "2999-01-01 00:00:00", "message_id": "bad-future"},
        {**GOOD, "msg_seq": 9, "content": "bad ts", "ts": "yesterday-ish", "message_id": "bad-ts"},
        {**GOOD, "msg_seq": "nine", "content": "bad seq", "message_id": "bad-seq"},
        {**GOOD, "msg_seq": 10, "content": "I have a cat named Miso.", "message_id": None},
    ]


def test_every_landed_row_is_accepted_or_rejected_with_reason(fresh_store: MemoryStore, tmp_path: Path) -> None:
    rows = _rows()
    jsonl = tmp_path / "log.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows[:6]) + "this line is not json\n")
    csv_path = tmp_path / "log.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows[6:]:
            w.writerow(r)
    # invalid UTF-8 inside an otherwise fine CSV row
    with open(csv_path, "ab") as fh:
        fh.write(b"u1,s1,user,2026-11-01 10:00:00,11,caf\xe9 au lait,bad-utf8\n")
    parquet = tmp_path / "log.parquet"
    con = duckdb.connect()
    con.execute(
        "copy (select 'u2' as user_id, 's9' as session_id, 'user' as role, '2026-11-02 08:00:00' as ts,"
        " 1 as msg_seq, 'I like green tea.' as content, 'pq-1' as message_id) to ? (format parquet)",
        [str(parquet)],
    )
    con.close()
    assert fresh_store.ingest(jsonl).rows == 7
    assert fresh_store.ingest(csv_path).rows == 6
    assert fresh_store.ingest(parquet).rows == 1
    assert fresh_store.ingest(jsonl).skipped  # same bytes again: not landed twice

    fresh_store.build()

    reasons = dict(query(fresh_store, "select coalesce(message_id, content), reject_reason from session_log_rejects"))
    assert reasons["bad-empty"] == "empty_content"
    assert reasons["bad-blank"] == "empty_content"
    assert reasons["bad-role"] == "unknown_role"
    assert reasons["bad-user"] == "null_user"
    assert reasons["ok-1"] == "duplicate_message_id"
    assert reasons["bad-future"] == "future_timestamp"
    assert reasons["bad-ts"] == "invalid_timestamp"
    assert reasons["bad-seq"] == "invalid_msg_seq"
    assert reasons["bad-utf8"] == "invalid_utf8"
    unreadable = query(fresh_store, "select reject_reason from session_log_rejects where content = 'this line is not json'")
    assert unreadable == [("invalid_json",)]  # refused at the door, kept with its reason
    accepted = {r[0] for r in query(fresh_store, "select message_id from session_messages")}
    assert {"ok-1", "ok-2", "pq-1"} <= accepted
    assert any(m.startswith("m2_") for m in accepted)  # generated id (unambiguous hash, docs/data_protection.md)
    landed, acc, rej = query(
        fresh_store,
        "select (select count(*) from session_log), (select count(*) from session_messages),"
        " (select count(*) from session_log_rejects)",
    )[0]
    assert landed == 14 and acc + rej == landed
    # the kept duplicate is the first one landed
    assert query(fresh_store, "select content from session_messages where message_id = 'ok-1'")[0][0] == "I prefer dark mode."


def test_unsupported_file_type_is_a_clear_error(fresh_store: MemoryStore, tmp_path: Path) -> None:
    import pytest

    from recall_shim import InvalidInput

    p = tmp_path / "log.xlsx"
    p.write_bytes(b"PK")
    with pytest.raises(InvalidInput, match="unsupported file type"):
        fresh_store.ingest(p)
    with pytest.raises(InvalidInput, match="no such file"):
        fresh_store.ingest(tmp_path / "missing.jsonl")
