"""Property-based (hypothesis): random JSONL and CSV files through the real ``ingest`` never
crash and never lose a row: every input row is landed, either for the build or refused at the
door with a reason (counted in ``IngestReport.refused``), or the whole file is refused with a
clear InvalidInput and nothing of it lands. Rows written by a CSV writer in any dialect are read
back exactly. One dbt build at the end shows the landed rows all reach session_messages or
session_log_rejects."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recall_shim import InvalidInput, MemoryStore

from .conftest import query

EXE = str(Path(sys.executable).with_name("agent-memory"))
FIELDS = ["user_id", "session_id", "agent_id", "msg_seq", "role", "content", "ts", "message_id"]
DOOR_REASONS = {"invalid_user_id", "invalid_session_id", "invalid_agent_id", "invalid_message_id", "invalid_json",
                "invalid_content", "content_too_long", "invalid_msg_seq", "invalid_timestamp", "unknown_role"}
SHARED_FILES = 60
SETTINGS = settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

nasty_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
special_ids = st.sampled_from(["alice", "hu", "hu\u200b", "\ufeffhu", "\u202ehu", " hu", "hu\x00", "用户", "👩‍💻",
                               "cafe\u0301", "", "   ", "x" * 300, "null", "'; drop table session_log; --"])
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), nasty_text, special_ids),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(nasty_text, inner, max_size=3)),
    max_leaves=6)
HOSTILE_LINES = ['{"user_id": "u", "content": "x", "msg_seq": ' + "9" * 5000 + "}", "[" * 50_000 + "]" * 50_000,
                 '{"user_id": "u", "content": ' + "[" * 50_000 + "]" * 50_000 + "}", "not json", "[1, 2]", "{",
                 '"just a string"', "\ufeff{}", '{"user_id": "u", "content": "' + "c" * 25_000 + '"}']


@st.composite
def jsonl_line(draw: Any) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.sampled_from(HOSTILE_LINES))
    if kind == 1:
        return draw(nasty_text.filter(lambda t: "\n" not in t))
    keys = {f: draw(st.one_of(special_ids, json_values)) for f in FIELDS if draw(st.integers(0, 4))}
    if draw(st.booleans()):  # mostly plausible rows
        keys.update({"user_id": draw(special_ids), "content": draw(nasty_text), "role": "user",
                     "ts": "2026-01-01 10:00:00", "session_id": "s", "msg_seq": draw(st.integers())})
    if draw(st.integers(0, 5)) == 0:
        keys = {k.upper() if draw(st.booleans()) else f" {k}": v for k, v in keys.items()}
    return json.dumps(keys, ensure_ascii=draw(st.booleans()))


@st.composite
def csv_file(draw: Any) -> tuple[str, int | None, list[dict[str, str]]]:
    """(file text, rows written or None when the file is raw text, the rows written)."""
    delimiter = draw(st.sampled_from([",", ";", "\t", "|"]))
    columns = draw(st.lists(st.sampled_from(FIELDS + ["extra"]), unique=True, min_size=1, max_size=9))
    header = [draw(st.sampled_from([c, c.upper(), c.title()])) for c in columns]
    bom = "\ufeff" if draw(st.booleans()) else ""
    rows = draw(st.lists(st.fixed_dictionaries({c: st.one_of(special_ids, nasty_text) for c in columns}), max_size=8))
    if draw(st.integers(0, 3)) == 0:  # raw text: unquoted values, maybe ", " separators or stray quotes
        sep = delimiter + draw(st.sampled_from(["", " "]))
        lines = [sep.join(header)] + [sep.join(r[c] for c in columns) for r in rows]
        return bom + "\n".join(lines) + "\n", None, rows
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=delimiter, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow(header)
    for r in rows:
        writer.writerow([r[c] for c in columns])
    return bom + buf.getvalue(), len(rows), rows


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store the first SHARED_FILES examples also land their files in (built once, by the last
    test: a sample keeps that build small)."""
    return {"store": MemoryStore(tmp_path_factory.mktemp("props") / "store.duckdb"), "rows": 0, "refused": 0,
            "files": 0}


def landed(store: MemoryStore) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in sorted(store.paths.messages.glob("*.jsonl")):
        out += [json.loads(line) for line in p.read_text(encoding="ascii").splitlines()]
    return out


def check_ingest(shared: dict[str, Any], path: Path, expected_rows: int | None) -> tuple[Any, list[dict[str, Any]]]:
    """Ingest ``path`` into a fresh store: refused whole (nothing landed) or every row landed
    with its door verdict; then land it in the shared store too."""
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / "store.duckdb")
        try:
            rep = store.ingest(path)
        except InvalidInput as exc:
            assert str(exc) and "nothing was landed" in str(exc)
            assert landed(store) == []
            return None, []
        records = landed(store)
    assert rep.rows == len(records)
    if expected_rows is not None:
        assert rep.rows == expected_rows  # no row dropped, none invented
    reasons: dict[str, int] = {}
    for r in records:
        assert set(r) >= set(FIELDS) and isinstance(r["landing_id"], str)
        assert all(r[f] is None or isinstance(r[f], str) for f in FIELDS)  # every value is text
        if r["door_reason"] is not None:
            assert r["door_reason"] in DOOR_REASONS
            reasons[r["door_reason"]] = reasons.get(r["door_reason"], 0) + 1
        assert r["content"] is None or len(r["content"]) <= 20_000
    assert reasons == rep.refused and rep.accepted == rep.rows - sum(reasons.values())
    if shared["files"] >= SHARED_FILES:
        return rep, records
    shared["files"] += 1
    again = shared["store"].ingest(path, force=True)
    shared["rows"] += again.rows
    shared["refused"] += sum(again.refused.values())
    return rep, records


@SETTINGS
@given(lines=st.lists(jsonl_line(), min_size=1, max_size=8), bom=st.booleans())
def test_random_jsonl_never_crashes_or_loses_a_row(shared: dict[str, Any], lines: list[str], bom: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.jsonl"
        path.write_text(("\ufeff" if bom else "") + "\n".join(lines) + "\n", encoding="utf-8")
        rows_in = sum(1 for i, line in enumerate(lines) if (line.lstrip("\ufeff") if i == 0 and bom else line).strip())
        rep, _ = check_ingest(shared, path, rows_in)
        if rep is None:  # refused whole: only when no object names user_id or none names content
            objects = [json.loads(x) for x in lines if x.startswith("{") and x.strip() not in HOSTILE_LINES]
            assert objects


@SETTINGS
@given(spec=csv_file())
def test_random_csv_is_read_back_exactly_or_refused_whole(shared: dict[str, Any],
                                                         spec: tuple[str, int | None, list[dict[str, str]]]) -> None:
    text, n_rows, rows = spec
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.csv"
        path.write_text(text, encoding="utf-8", newline="")
        rep, records = check_ingest(shared, path, n_rows)
    columns = {c.lower() for c in text.lstrip("\ufeff").splitlines()[0].replace(";", ",").replace("\t", ",")
               .replace("|", ",").replace(" ", "").split(",")}
    if not {"user_id", "content"} <= columns:
        assert rep is None  # a file without user_id and content columns is refused, never all-NULL rows
        return
    if n_rows is None:  # raw text: read or refused whole, either way no crash and no lost row
        return
    assert rep is not None, text  # a CSV writer's file in any of the dialects is read
    for written, got in zip(rows, records):  # and read back exactly
        assert got["content"] == (written.get("content") or None)
        for col in ("user_id", "session_id", "message_id"):
            if col in written and got["door_reason"] is None:
                assert got[col] == (unicodedata.normalize("NFC", written[col]) or None), (col, written, got)


def test_cli_ingest_counts_match_the_landing_file(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([json.dumps({"user_id": "u", "content": "hi", "message_id": "a"}),
                               json.dumps({"user_id": True, "content": "hi"}), HOSTILE_LINES[0], HOSTILE_LINES[1],
                               json.dumps({"user_id": "u", "content": "c" * 20_001})]) + "\n")
    db = tmp_path / "cli.duckdb"
    out = subprocess.run([EXE, "--db", str(db), "ingest", str(path)], capture_output=True, text=True,
                         env=dict(os.environ), timeout=120)
    assert out.returncode == 0, out.stderr
    records = landed(MemoryStore(db))
    assert len(records) == 5 and sum(r["door_reason"] is not None for r in records) == 4
    assert out.stdout.strip() == (f"{path}: landed 5 rows; 4 of them refused at the door and kept only as rejects "
                                  "(session_log_rejects): content_too_long 1, invalid_json 2, invalid_user_id 1")


def test_the_landed_rows_all_reach_messages_or_rejects(shared: dict[str, Any], tmp_path: Path) -> None:
    store = shared["store"]
    path = tmp_path / "one.jsonl"  # so this test means something when run alone
    path.write_text(json.dumps({"user_id": "u", "session_id": "s", "msg_seq": 1, "role": "user",
                                "content": "I like tea.", "ts": "2026-01-01 10:00:00"}) + "\n" + HOSTILE_LINES[1] + "\n")
    rep = store.ingest(path, force=True)
    shared["rows"] += rep.rows
    shared["refused"] += sum(rep.refused.values())
    store.build()
    (n_log, n_ok, n_rej, n_door), = query(
        store, "select (select count(*) from session_log), (select count(*) from session_messages),"
               " (select count(*) from session_log_rejects), (select count(*) from session_log where door_reason is not null)")
    assert n_log == shared["rows"] and n_ok + n_rej == n_log
    assert n_door == shared["refused"]
    door_rejects = query(store, "select count(*) from session_log_rejects r join session_log l using (landing_id)"
                                " where l.door_reason is not null and r.reject_reason = l.door_reason")
    assert door_rejects == [(n_door,)]  # every door refusal is a reject with that reason
