"""Hostile and ordinary-but-awkward input files: one poison row never stops a build, hostile JSON
lines become rejects while the good rows of the same file land, CSV from ordinary tools is read
correctly or refused whole with a clear error, and ingest reports exactly what it landed.

One store is built once for the module (a landed 34 MB row from an old version included)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from recall_shim import InvalidInput, MemoryStore

from .conftest import query

EXE = str(Path(sys.executable).with_name("agent-memory"))
HEADER = "user_id,session_id,msg_seq,role,content,ts,message_id"
HUGE = 34_000_000


def row(mid: str, content: str = "I like green tea.", user: Any = "u1", **extra: Any) -> dict[str, Any]:
    return {"user_id": user, "session_id": "s1", "msg_seq": 1, "role": "user", "content": content,
            "ts": "2026-01-01 10:00:00", "message_id": mid, **extra}


def jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def legacy_landing(store: MemoryStore, content: str, mid: str) -> None:
    """A landing file as a version without the door wrote it (no door_reason, any size)."""
    rec = {"landing_id": uuid.uuid4().hex, "landed_at": "2026-01-01 10:00:01", **row(mid, content, "legacy"),
           "msg_seq": "1", "content_invalid_utf8": False}
    (store.paths.messages / "20260101T100001000000-legacy.jsonl").write_text(json.dumps(rec) + "\n")


CSV_VARIANTS = {  # file bytes -> the rows they must land (user, content, message_id)
    "bom_upper.csv": ("\ufeff" + HEADER.upper() + "\r\nu1,s1,1,user,I like tea.,2026-01-01 10:00:00,csv-bom\r\n"),
    "spaced.csv": (HEADER.replace(",", ", ") + "\nu1, s1, 2, user, I like jazz., 2026-01-01 10:00:00, csv-spaced\n"),
    "semicolon.csv": (HEADER.replace(",", ";") + "\nu1;s1;3;user;I like cats, and dogs.;2026-01-01 10:00:00;csv-semi\n"),
    "tab.csv": (HEADER.replace(",", "\t") + "\nu1\ts1\t4\tuser\tI like rain.\t2026-01-01 10:00:00\tcsv-tab\n"),
    "quoted_header.csv": ('"User_Id","Session_Id","Msg_Seq","Role","Content","Ts","Message_Id"\n'
                          'u1,s1,5,user,"I like ""quotes"", and\nnewlines.",2026-01-01 10:00:00,csv-quoted\n'),
}
REFUSED_FILES = {  # file text -> a phrase of the error
    "unterminated.csv": (HEADER + '\nu1,s1,1,user,"I like tea.,2026-01-01 10:00:00,csv-open\n'
                         'u1,s1,2,user,second row,2026-01-01 10:00:00,csv-swallowed\n', "line"),
    "extra_field.csv": (HEADER + "\nu1,s1,1,user,I like tea, coffee,2026-01-01 10:00:00,csv-extra\n", "8 fields"),
    "no_columns.csv": ("name,text\nalice,hello\n", "no user_id or content column"),
    "no_content.csv": ("user_id,message\nalice,hello\n", "no content column"),
    "no_columns.jsonl": (json.dumps({"name": "alice", "text": "hello"}) + "\n", "no user_id or content column"),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("hostile_files")
    store = MemoryStore(tmp / "store.duckdb")
    legacy_landing(store, "x" * HUGE, "legacy-huge")
    reports = {}
    hostile = jsonl(tmp / "hostile.jsonl", [
        row("good-1"),
        '{"user_id": "u1", "content": "big int", "msg_seq": ' + "9" * 5000 + "}",
        "[" * 100_000 + "]" * 100_000,
        '{"user_id": "u1", "content": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '["an", "array"]',
        "not json at all",
        row("good-2", "I live in Oslo."),
    ])
    reports["hostile"] = store.ingest(hostile)
    reports["huge"] = store.ingest(jsonl(tmp / "huge.jsonl", [row("door-huge", "y" * HUGE), row("good-3", "ok")]))
    for name, text in CSV_VARIANTS.items():
        (tmp / name).write_text(text, encoding="utf-8")
        reports[name] = store.ingest(tmp / name)
    refusals = {}
    for name, (text, _) in REFUSED_FILES.items():
        (tmp / name).write_text(text, encoding="utf-8")
        with pytest.raises(InvalidInput) as exc:
            store.ingest(tmp / name)
        refusals[name] = str(exc.value)
    landed = sum(len(p.read_text().splitlines()) for p in store.paths.messages.glob("*.jsonl"))
    store.build()
    return {"store": store, "reports": reports, "refusals": refusals, "landed": landed, "tmp": tmp}


def test_build_succeeds_with_a_landed_34mb_row(built: dict[str, Any]) -> None:
    store = built["store"]
    (reason, length), = query(store, "select reject_reason, length(content) from session_log_rejects"
                                     " where message_id = 'legacy-huge'")
    assert (reason, length) == ("content_too_long", HUGE)
    assert query(store, "select count(*) from session_messages where message_id = 'good-1'") == [(1,)]


def test_a_huge_content_is_refused_at_the_door(built: dict[str, Any], tmp_path: Path) -> None:
    rep = built["reports"]["huge"]
    assert rep.rows == 2 and rep.refused == {"content_too_long": 1} and rep.accepted == 1
    (reason, length), = query(built["store"], "select reject_reason, length(content) from session_log_rejects"
                                              " where message_id = 'door-huge'")
    assert (reason, length) == ("content_too_long", 20_000)  # kept with its reason, not in full
    store = MemoryStore(tmp_path / "store.duckdb")
    with pytest.raises(InvalidInput, match="max_content_chars") as exc:
        store.remember("u1", "z" * HUGE)
    assert type(exc.value).__name__ == "ContentTooLong"  # the HTTP server maps it to 413
    with pytest.raises(InvalidInput, match="row 1: content"):
        store.remember_many([row("a"), row("b", "z" * 20_001)])
    assert store.remember("u1", "z" * 20_000)  # the limit itself is fine


def test_hostile_json_lines_become_rejects_and_good_rows_land(built: dict[str, Any]) -> None:
    rep = built["reports"]["hostile"]
    assert rep.rows == 7 and rep.refused == {"invalid_json": 5}
    store = built["store"]
    accepted = {r[0] for r in query(store, "select message_id from session_messages")}
    assert {"good-1", "good-2", "good-3"} <= accepted
    reasons = [r[0] for r in query(store, "select reject_reason from session_log_rejects where user_id is null")]
    assert reasons.count("invalid_json") == 5
    longest = query(store, "select max(length(content)) from session_log_rejects where reject_reason = 'invalid_json'")
    assert longest == [(20_000,)]  # the 200k-character nesting line is kept cut to the limit


def test_csv_from_ordinary_tools_is_read_correctly(built: dict[str, Any]) -> None:
    store = built["store"]
    got = dict((r[0], r[1:]) for r in query(store, "select message_id, user_id, session_id, content from session_messages"
                                                   " where message_id like 'csv-%'"))
    assert got == {"csv-bom": ("u1", "s1", "I like tea."), "csv-spaced": ("u1", "s1", "I like jazz."),
                   "csv-semi": ("u1", "s1", "I like cats, and dogs."), "csv-tab": ("u1", "s1", "I like rain."),
                   "csv-quoted": ("u1", "s1", 'I like "quotes", and\nnewlines.')}
    for name in CSV_VARIANTS:
        assert built["reports"][name].rows == 1 and not built["reports"][name].refused


def test_unreadable_csv_and_files_without_columns_are_refused_whole(built: dict[str, Any]) -> None:
    for name, (_, phrase) in REFUSED_FILES.items():
        assert phrase in built["refusals"][name] and "nothing was landed" in built["refusals"][name], name
    ids = {r[0] for r in query(built["store"], "select message_id from session_log")}
    assert not ids & {"csv-open", "csv-swallowed", "csv-extra"}


def test_every_landed_row_reaches_messages_or_rejects(built: dict[str, Any]) -> None:
    store = built["store"]
    (n_log, n_ok, n_rej), = query(store, "select (select count(*) from session_log), (select count(*) from"
                                         " session_messages), (select count(*) from session_log_rejects)")
    reported = 1 + sum(r.rows for r in built["reports"].values())  # + the legacy row
    assert n_log == reported == built["landed"] and n_ok + n_rej == n_log


def test_cli_ingest_reports_refusals_and_refused_files(built: dict[str, Any], tmp_path: Path) -> None:
    db = tmp_path / "cli.duckdb"
    mixed = jsonl(tmp_path / "mixed.jsonl", [row("a"), row("b", user="hu\u200b"), row("c", "w" * 20_001), "{bad"])
    bad = built["tmp"] / "unterminated.csv"
    out = subprocess.run([EXE, "ingest", str(mixed), str(bad), "--db", str(db)], capture_output=True, text=True,
                         env=dict(os.environ), timeout=120)
    assert out.returncode == 2, out.stderr  # one file was refused
    assert (f"{mixed}: landed 4 rows; 3 of them refused at the door and kept only as rejects (session_log_rejects): "
            "content_too_long 1, invalid_json 1, invalid_user_id 1") in out.stdout
    assert "unterminated.csv" in out.stderr and "nothing was landed" in out.stderr
