"""The one id rule (recall_shim/write/ids.py) on every path: ids are strings (session_id and
message_id may be JSON integers, taken as decimal text), NFC-normalised, free of control and
invisible format characters. A call that breaks it raises; an input-file row that breaks it lands
only as a reject with ``invalid_<field>``; lookalike ids never become distinct users."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from recall_shim import InvalidInput, InvalidQuery, LocalPostgres, MemoryStore, PgMemoryStore

from .conftest import start_postgres

EXE = str(Path(sys.executable).with_name("agent-memory"))
LOOKALIKES = ["hu\u200b", "\ufeffhu", "\u202ehu", "h\u00adu", "hu\u2028", "hu\x00", " hu", "hu\t", "hu\ud800"]
WRONG_TYPES: list[Any] = [True, False, ["a", "b"], {"$ne": None}, 1.5, 7]
GOOD = {"session_id": "s1", "role": "user", "msg_seq": 1, "content": "I like tea.", "ts": "2026-01-01 10:00:00"}


def landed_records(store: MemoryStore) -> list[dict[str, Any]]:
    out = []
    for p in sorted(store.paths.messages.glob("*.jsonl")):
        out += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return out


def test_the_rule() -> None:
    from recall_shim import normalise_id

    assert normalise_id("hu", "user_id") == "hu"
    assert normalise_id("cafe\u0301", "user_id") == "caf\u00e9"  # NFC: one user, not two
    assert normalise_id("用户一", "user_id") == "用户一" and normalise_id("👩‍💻", "user_id") == "👩‍💻"
    assert normalise_id(42, "message_id") == "42" and normalise_id(7, "session_id") == "7"
    for field in ("user_id", "session_id", "agent_id", "message_id"):
        for bad in LOOKALIKES + [True, ["a", "b"], {"$ne": None}, 1.5, None, "", "   ", "x" * 257]:
            with pytest.raises(InvalidInput) as exc:
                normalise_id(bad, field)
            assert isinstance(exc.value, InvalidQuery)  # also what recall callers catch
            assert exc.value.reason == f"invalid_{field}" and field in str(exc.value)
    with pytest.raises(InvalidInput, match="must be a string"):
        normalise_id(7, "user_id")  # user and agent ids: strings only


@pytest.mark.parametrize("field", ["user_id", "session_id", "agent_id", "message_id"])
def test_remember_refuses_every_bad_id(fresh_store: MemoryStore, field: str) -> None:
    kwargs = {"user_id": "u1", "content": "hello", "session_id": "s1", "agent_id": "a1", "message_id": "m1"}
    bad_values = LOOKALIKES + [v for v in WRONG_TYPES if not (isinstance(v, int) and not isinstance(v, bool)
                                                             and field in ("session_id", "message_id"))]
    for bad in bad_values:
        with pytest.raises(InvalidInput, match=field):
            fresh_store.remember(**{**kwargs, field: bad})
        with pytest.raises(InvalidInput, match=f"row 1: {field}"):
            fresh_store.remember_many([{**GOOD, "user_id": "u1"}, {**GOOD, "user_id": "u1", field: bad}])
    assert landed_records(fresh_store) == []  # nothing landed, not even the good row of the batch
    mid = fresh_store.remember("cafe\u0301", "hello", session_id=12, message_id=99)  # type: ignore[arg-type]
    assert mid == "99"
    (rec,) = landed_records(fresh_store)
    assert (rec["user_id"], rec["session_id"], rec["message_id"]) == ("caf\u00e9", "12", "99")


def test_cli_remember_refuses_a_lookalike_user(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    out = subprocess.run([EXE, "remember", "hi", "--user", "hu\u200b", "--db", str(db)], capture_output=True,
                         text=True, env=dict(os.environ), timeout=120)
    assert out.returncode == 2 and "U+200B" in out.stderr and "user_id" in out.stderr
    assert not [p for p in (tmp_path / "s.inbox" / "messages").glob("*.jsonl") if p.stat().st_size]


def test_ingest_lands_bad_id_rows_as_rejects_with_reason(fresh_store: MemoryStore, tmp_path: Path) -> None:
    rows = [{**GOOD, "user_id": "hu", "message_id": "good-1"},
            {**GOOD, "user_id": "hu", "message_id": 123456789, "session_id": 42},  # ints: decimal text
            {**GOOD, "user_id": True, "message_id": "bad-bool"},
            {**GOOD, "user_id": ["a", "b"], "message_id": "bad-list"},
            {**GOOD, "user_id": {"$ne": None}, "message_id": "bad-object"},
            {**GOOD, "user_id": 12, "message_id": "bad-int-user"},
            {**GOOD, "user_id": "hu\u200b", "message_id": "bad-zwsp"},
            {**GOOD, "user_id": "\ufeffhu", "message_id": "bad-bom"},
            {**GOOD, "user_id": "\u202ehu", "message_id": "bad-bidi"},
            {**GOOD, "user_id": "hu", "session_id": "s\x00", "message_id": "bad-session"},
            {**GOOD, "user_id": "hu", "message_id": "m\x00"},
            {**GOOD, "user_id": "hu", "agent_id": 3.5, "message_id": "bad-agent"}]
    path = tmp_path / "ids.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rep = fresh_store.ingest(path)
    assert rep.rows == len(rows)  # every row landed: 2 for the build, the others as rejects
    assert rep.refused == {"invalid_agent_id": 1, "invalid_message_id": 1, "invalid_session_id": 1,
                           "invalid_user_id": 7}
    by_reason = {r["door_reason"] for r in landed_records(fresh_store)}
    assert by_reason == {None, "invalid_user_id", "invalid_session_id", "invalid_message_id", "invalid_agent_id"}
    passed = [r for r in landed_records(fresh_store) if r["door_reason"] is None]
    assert [(r["user_id"], r["session_id"], r["message_id"]) for r in passed] == [
        ("hu", "s1", "good-1"), ("hu", "42", "123456789")]
    for r in landed_records(fresh_store):  # a refused id is kept visible, never as an invisible lookalike
        assert "\u200b" not in (r["user_id"] or "") and "\x00" not in json.dumps(r["message_id"])


def test_reads_and_forget_apply_the_rule(demo_store: MemoryStore) -> None:
    for user in ["demo\u200b", "\ufeffdemo", True, ["demo"], {"$ne": None}]:
        with pytest.raises(InvalidQuery, match="user_id"):
            demo_store.recall("部署", user_id=user, record_access=False)  # type: ignore[arg-type]
        with pytest.raises(InvalidQuery, match="user_id"):
            demo_store.prompt(["部署"], user_id=user, record_access=False)  # type: ignore[arg-type]
        with pytest.raises(InvalidQuery, match="user_id"):
            demo_store.similarity_distribution(["部署"], user_id=user)  # type: ignore[arg-type]
    with pytest.raises(InvalidQuery, match="session_id"):
        demo_store.recall("部署", user_id="demo", session_id="s3\u200b", record_access=False)
    with pytest.raises(InvalidInput, match="user_id"):
        demo_store.forget(user_id=["demo"])  # type: ignore[arg-type]


def test_postgres_store_applies_the_same_rule(tmp_path: Path) -> None:
    server = LocalPostgres(tmp_path / "pg")
    conn = start_postgres(server)
    try:
        store = PgMemoryStore(conn, work_dir=tmp_path / "work")
        for bad in ["hu\u200b", True, ["a"]]:
            with pytest.raises(InvalidInput, match="user_id"):
                store.remember(bad, "hello")  # type: ignore[arg-type]
            with pytest.raises(InvalidInput, match="row 0: user_id"):
                store.remember_many([{**GOOD, "user_id": bad}])
        with pytest.raises(InvalidInput, match="max_content_chars"):
            store.remember("hu", "x" * 20_001)
        path = tmp_path / "ids.jsonl"
        path.write_text(json.dumps({**GOOD, "user_id": "cafe\u0301"}) + "\n"
                        + json.dumps({**GOOD, "user_id": "hu\u200b"}) + "\n")
        rep = store.ingest(path)
        assert rep.rows == 2 and rep.refused == {"invalid_user_id": 1}
        with conn.connect() as con:
            got = con.execute(f'select user_id, door_reason from "{conn.schema}".session_log_landing '
                              "order by door_reason nulls first").fetchall()
        assert got == [("caf\u00e9", None), ("hu\\u200b", "invalid_user_id")]
        store.close()
    finally:
        server.stop()
