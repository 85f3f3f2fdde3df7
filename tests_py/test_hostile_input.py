"""Hostile input, property-based (hypothesis): every landed row is either stored verbatim (and
its memory recalled verbatim, in its user's scope only) or rejected with a reason and kept in
session_log_rejects; recall never raises anything but recall_shim errors.

Builds are the expensive part, so the three batches of ~100-150 generated rows hypothesis draws
land in one store, built once, and are checked row by row; recall examples run against one built
store."""

from __future__ import annotations

import csv
import json
import re
import tempfile
import unicodedata
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from recall_shim import AgentMemoryError, InvalidQuery, MemoryStore, normalise_id

from .conftest import query

BASE_TS = datetime(2020, 1, 1, 10, 0, 0)
SQLISH = ["'; drop table long_term_memory; --", "\" or 1=1 --", "$1", "?", "%s", "{{ var('as_of') }}", "\\",
          "''", "/* */", "\\x00", "null", "NULL", "${HOME}", "\\1", "robert'); delete from session_log;--",
          "' union select * from long_term_memory where '1'='1"]
UNICODE = ["😀", "👩‍👩‍👧", "\u202eevil\u202c", "\u200f", "مرحبا بالعالم", "שלום", "e\u0301", "𝕏𝕐", "\ufeff",
           "\u2028", "用户", "\u200b", "Ω≈ç√", "\x85"]
BAD_TS = ["-infinity", "infinity", "-0044-03-15 00:00:00", "9999-12-31 23:59:59", "294247-01-10 04:00:54",
          "not a time", "", "2026-13-45 99:99:99"]
SPLIT = set(".!?;。！？；\n")
RE2_SPACE = set("\t\n\f\r ")
C0_BAD = {*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F}
ALLOWED_REASONS = {"null_user", "invalid_user_id", "null_session", "invalid_utf8", "empty_content",
                   "content_too_long", "control_characters", "unknown_role", "invalid_msg_seq",
                   "invalid_timestamp", "future_timestamp", "duplicate_message_id"}

texts = st.text(max_size=40)
user_ids = st.one_of(
    st.sampled_from(["alice", "bob", "o'brien", "用户一", "👩‍💻", "עברית", " alice", "alice ", "tab\tid",
                     "nul\x00id", "", "   ", "\u3000", "x" * 300, "a\x85"] + SQLISH),
    texts,
)
payloads = st.one_of(st.sampled_from(SQLISH + UNICODE), texts)


@st.composite
def rows(draw: Any) -> dict[str, Any]:
    p = draw(payloads)
    content = draw(st.sampled_from(["pref", "raw", "blank"]))
    if draw(st.integers(0, 9)) < 8:
        ts: str = (BASE_TS - timedelta(days=draw(st.integers(0, 737_000)), seconds=draw(st.integers(0, 86_399)))
                   ).isoformat(sep=" ")
        ts_ok = True
    else:
        ts, ts_ok = draw(st.sampled_from(BAD_TS)), False
    return {"user_id": draw(user_ids), "payload": p, "form": content,
            "blank": draw(st.sampled_from(["", " ", "\t\n", "\u3000", "\x0b", "\x1c"])), "ts": ts, "ts_ok": ts_ok}


def is_blank(s: str) -> bool:  # SQL: regexp_full_match(s, '[\s\pZ]*') (RE2 \s is ASCII)
    return all(c in RE2_SPACE or unicodedata.category(c) in ("Zs", "Zl", "Zp") for c in s)


def user_ok(u: str | None) -> bool:  # the one id rule (recall_shim/write/ids.py), and staging's checks
    try:
        normalise_id(u, "user_id")
    except InvalidQuery:
        return False
    return not is_blank(u) and len(u) <= 256  # type: ignore[arg-type]


def possible_reasons(row: dict[str, Any]) -> set[str] | None:
    """None when the row must be accepted, else the reasons it may be rejected with (the first
    failing check of int_messages_validated, in its order)."""
    if not user_ok(row["user_id"]):
        return {"null_user", "invalid_user_id"}
    c = row["content"]
    if is_blank(c):
        return {"empty_content"}
    if len(c) > 20000:
        return {"content_too_long"}
    if any(ord(ch) in C0_BAD for ch in c):
        return {"control_characters"}
    if not row["ts_ok"]:
        return {"invalid_timestamp", "future_timestamp"}
    return None


# the seed's 'content' rewrites in step order (a memory is a third-person statement: a payload's
# lone "i" or "me" is rewritten); RE2's $ is the end of the text, Python's \Z
CONTENT_REWRITES = [
    (re.compile(r["pattern"].replace("$", r"\Z")), r["replacement"])
    for r in sorted(csv.DictReader((Path(__file__).resolve().parents[1] / "seeds" / "clause_rules.csv")
                                   .read_text(encoding="utf-8").splitlines()),
                    key=lambda r: (int(r["step"]), r["clause_rule_id"]))
    if r["purpose"] == "content"
]


def expected_memory(row: dict[str, Any]) -> str | None:
    """The preference memory the English rule extracts from 'I prefer zq<i>x<payload>'."""
    if row["form"] != "pref" or SPLIT & set(row["payload"]) or len(row["content"]) > 1000:
        return None
    memory = "User prefers " + row["content"][len("I prefer "):]
    for pattern, replacement in CONTENT_REWRITES:
        memory = pattern.sub(replacement, memory)
    while memory and unicodedata.category(memory[-1]) == "Zs":  # trailing spaces of any kind (\p{Zs}:
        memory = memory[:-1]  # U+0020, U+00A0, U+3000, ...) are trimmed, as DuckDB's trim() in the
    return memory  # extraction does; the line and paragraph separators (U+2028, U+2029) are kept


def materialise(batches: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The generated batches' rows (batch ``b``, row ``i``: message id ``h{b}-{i}``, content
    ``...zq{b}n{i}x<payload>``, session ``s{b}``), then the fixed cases."""
    out = []
    for b, batch in enumerate(batches):
        for i, r in enumerate(batch):
            tag = f"zq{b}n{i}x{r['payload']}"
            content = {"pref": f"I prefer {tag}", "raw": tag, "blank": r["blank"]}[r["form"]]
            out.append({**r, "content": content, "message_id": f"h{b}-{i}", "session_id": f"s{b}", "msg_seq": i,
                        "role": "user"})
    fixed = [  # always in the store: the cases a generator rarely reaches
        ("I prefer " + "x" * 1_000_000, "alice", BASE_TS.isoformat(sep=" "), True),  # 1 MB
        ("I prefer zq\x00tea", "alice", BASE_TS.isoformat(sep=" "), True),
        ("I prefer zqnul-user", "nul\x00user", BASE_TS.isoformat(sep=" "), True),
        ("I prefer zqyear-one", "alice", "0001-01-01 00:00:00", True),
        ("I prefer zqbc", "alice", "-0044-03-15 00:00:00", False),
        ("I prefer zq👩‍👩‍👧 and \u202eevil", "robert'); drop table session_log;--", BASE_TS.isoformat(sep=" "), True),
    ]
    for j, (content, user, ts, ok) in enumerate(fixed):
        out.append({"user_id": user, "payload": content[len("I prefer "):], "form": "pref", "content": content, "ts": ts,
                    "ts_ok": ok, "message_id": f"h-fixed-{j}", "session_id": "s", "msg_seq": j, "role": "user"})
    return out


def generated_batches() -> list[list[dict[str, Any]]]:
    """Three batches of 100-150 rows drawn by hypothesis (derandomized: the same every run)."""
    batches: list[list[dict[str, Any]]] = []

    @settings(max_examples=3, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck), database=None)
    @given(batch=st.lists(rows(), min_size=100, max_size=150))
    def draw(batch: list[dict[str, Any]]) -> None:
        batches.append(batch)

    draw()
    return batches


def test_hostile_rows_are_stored_verbatim_or_rejected_with_reason() -> None:
    """The rows of three generated batches land in one store, built once, and are checked row by
    row (one build instead of one per batch)."""
    batches = generated_batches()
    assert len(batches) == 3 and all(100 <= len(b) <= 150 for b in batches)
    rows_ = materialise(batches)
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / "store.duckdb")
        # a file: rows the door refuses (ids breaking the id rule, content over the limit) land as
        # rejects with their reason, where remember_many would refuse the whole call
        log = Path(tmp) / "hostile.jsonl"
        log.write_text("".join(json.dumps({k: r[k] for k in ("user_id", "session_id", "msg_seq", "role", "content",
                                                            "ts", "message_id")}) + "\n" for r in rows_))
        store.ingest(log)
        # invalid UTF-8 in an ingested file, in the content and in a user id
        bad = Path(tmp) / "bad.csv"
        bad.write_bytes(b"user_id,session_id,msg_seq,role,content,ts,message_id\n"
                        b"alice,s,1,user,I prefer caf\xe9,2020-01-01 10:00:00,bad-content\n"
                        b"ali\xffce,s,2,user,I prefer tea,2020-01-01 10:00:00,bad-user\n")
        store.ingest(bad)
        store.build()

        accepted = {r[0]: r[1:] for r in query(store, "select message_id, user_id, content from session_messages")}
        rejected = {r[0]: r[1:] for r in query(store, "select message_id, reject_reason, user_id, content from session_log_rejects")}
        assert rejected["bad-content"][0] == "invalid_utf8" and rejected["bad-content"][2] == "I prefer caf\ufffd"
        assert rejected["bad-user"][0] == "invalid_utf8" and rejected["bad-user"][1] == "ali\ufffdce"
        for r in rows_:
            mid = r["message_id"]
            assert (mid in accepted) != (mid in rejected), f"{mid} lost or doubled: {r!r}"
            reasons = possible_reasons(r)
            if reasons is None:
                assert mid in accepted, (r, rejected.get(mid))
                assert accepted[mid] == (unicodedata.normalize("NFC", r["user_id"]), r["content"])  # verbatim
            else:
                assert mid in rejected, r
                reason, user, content = rejected[mid]
                assert reason in reasons & ALLOWED_REASONS, (reason, reasons, r)
                # kept verbatim with its reason (content cut to the limit at the door)
                assert content == r["content"][:20000]
                if user_ok(r["user_id"]):
                    assert user == unicodedata.normalize("NFC", r["user_id"])

        # every expected memory is recalled verbatim, in its user's scope only. Near-identical
        # statements of one user are consolidated into one memory, whose content is the
        # extraction of one of its source messages, verbatim.
        owners = dict(query(store, "select memory_id, user_id from long_term_memory"))
        expected_by_message = {r["message_id"]: expected_memory(r) for r in rows_}
        by_user: dict[str, list[dict[str, Any]]] = {}
        for r in rows_:
            if expected_memory(r) is not None and possible_reasons(r) is None:
                by_user.setdefault(unicodedata.normalize("NFC", r["user_id"]), []).append(r)
        assert by_user
        for user, expected in by_user.items():
            got = store.recall_many([r["content"][len("I prefer "):] for r in expected], user_id=user,
                                    kinds=["preference"], min_sim=-1, top_k=100, record_access=False)
            for r, group in zip(expected, got):
                hit = [m for m in group if r["message_id"] in m.source_message_ids]
                assert hit, (user, r)
                assert hit[0].content in {expected_by_message.get(s) for s in hit[0].source_message_ids}, (hit[0], r)
            assert {owners[m.memory_id] for group in got for m in group} == {user}


# --- recall with hostile arguments ----------------------------------------------------------

vectors = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=384, max_size=384),
    st.lists(st.floats(min_value=-1e3, max_value=1e3), min_size=384, max_size=384),
    st.lists(st.floats(), max_size=500),
    st.lists(st.sampled_from([1e39, -1e39, 1e-45, 0.0]), min_size=384, max_size=384),
    st.lists(st.one_of(st.text(max_size=3), st.none(), st.lists(st.floats(), max_size=2)), min_size=1, max_size=384),
)
queries = st.one_of(st.text(max_size=80), st.sampled_from(SQLISH + UNICODE + ["", "   ", "a\ud800b", "q" * 2001]),
                    vectors)
scope_ids = st.one_of(st.none(), st.sampled_from(["demo", "s1", "a1", "", " ", "\x00", "a\ud800"] + SQLISH), texts)


@pytest.fixture(scope="module")
def demo_owners(demo_store: MemoryStore) -> dict[str, str]:
    return dict(query(demo_store, "select memory_id, user_id from long_term_memory"))


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(user_id=st.one_of(user_ids, st.sampled_from(["demo", "someone\ud800", "demo' or '1'='1"]), st.none(),
                         st.integers()),
       q=queries, top_k=st.one_of(st.none(), st.integers(-5, 200), st.floats(), st.just(True)),
       min_sim=st.one_of(st.none(), st.floats(), st.just("0.5")),
       kinds=st.one_of(st.none(), st.lists(st.one_of(texts, st.sampled_from(["fact", "skill", ""]))), st.just("fact")),
       agent_id=scope_ids, session_id=scope_ids)
@example(user_id="demo", q="喜欢什么输出方式", top_k=3, min_sim=-1.0, kinds=None, agent_id=None, session_id=None)
@example(user_id="demo", q="部署", top_k=None, min_sim=0.0, kinds=None, agent_id=None, session_id="s3")
@example(user_id="demo", q="x" * 1_000_000, top_k=None, min_sim=None, kinds=None, agent_id=None, session_id=None)
@example(user_id="demo", q=[float("nan")] * 384, top_k=None, min_sim=None, kinds=None, agent_id=None, session_id=None)
@example(user_id="demo", q=[1.0] * 383, top_k=None, min_sim=None, kinds=None, agent_id=None, session_id=None)
def test_recall_with_hostile_arguments_never_crashes(demo_store: MemoryStore, demo_owners: dict[str, str],
                                                     user_id: Any, q: Any, top_k: Any, min_sim: Any, kinds: Any,
                                                     agent_id: Any, session_id: Any) -> None:
    try:
        groups = demo_store.recall_many([q], user_id=user_id, top_k=top_k, min_sim=min_sim, kinds=kinds,
                                        agent_id=agent_id, session_id=session_id, record_access=False)
    except AgentMemoryError as exc:
        assert str(exc)  # a clear message
        return
    assert len(groups) == 1
    for m in groups[0]:
        assert demo_owners[m.memory_id] == user_id
        assert np.isfinite([m.similarity, m.strength, m.score]).all()
    if user_id == "demo" and q == "喜欢什么输出方式":
        assert groups[0] and groups[0][0].source_message_ids == ["demo-s1-1"]


def test_long_and_malformed_queries_are_clear_errors(demo_store: MemoryStore) -> None:
    with pytest.raises(InvalidQuery, match="limit is 2000"):
        demo_store.recall("x" * 1_000_000, user_id="demo")
    with pytest.raises(InvalidQuery, match="float32"):
        demo_store.recall([1e39] * 384, user_id="demo")
    with pytest.raises(InvalidQuery, match="surrogate"):
        demo_store.recall("a\ud800", user_id="demo")
    with pytest.raises(InvalidQuery, match="control characters"):
        demo_store.recall("x", user_id="demo\x00")
    with pytest.raises(InvalidQuery, match="queries must be a list"):
        demo_store.recall_many("not a list", user_id="demo")  # type: ignore[arg-type]
    # the statement binds values: an injection attempt is just an unknown user
    assert demo_store.recall("x", user_id="demo' or '1'='1", record_access=False) == []
    con = duckdb.connect(str(demo_store.snapshot_path), read_only=True)
    try:
        assert con.execute("select count(*) from long_term_memory").fetchone()[0] > 0
    finally:
        con.close()
