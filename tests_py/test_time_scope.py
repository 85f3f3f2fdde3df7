"""Dates in recall and time-scoped recall (issue 14 item 4, docs/recall.md "Dates in results" and
"Time-scoped recall"): every result says when it was said and, when the text said so, when it
happened; a question that names a time ("last week", "去年") weighs the memories said or happened in
that window, resolved against the build's as_of with the extraction's own time expressions. Real
store, real dbt build, the real embedding model, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date, datetime
from pathlib import Path

import pytest

from recall_shim import MemoryStore
from recall_shim.common.embedding import embed_texts
from recall_shim.serving.hybrid import Unserved
from recall_shim.serving.reader import run_compiled
from tests_py.conftest import query

EXE = str(Path(sys.executable).with_name("agent-memory"))
AS_OF = "2026-06-15 12:00:00"  # a Monday: "last week" is 2026-06-08 .. 06-14, "last month" May, "去年" 2025
WEIGHT = 3.0
MESSAGES = [
    ("2026-06-10 19:00:00", "I tried a new ramen place downtown, the broth was amazing."),
    ("2026-05-12 19:00:00", "I tried a new ramen place uptown, the broth was amazing."),
    ("2025-08-03 10:00:00", "我们去了杭州西湖玩，风景特别美。"),
    ("2026-04-18 10:00:00", "我们去了苏州园林玩，风景特别美。"),
    ("2026-06-01 09:00:00", "I moved to Porto last month."),
    ("2024-03-20 09:00:00", "I moved to Lisbon in March 2024."),
    ("2026-05-02 09:00:00", "我十一月份从厦门搬到了福州。"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    s = MemoryStore(tmp_path_factory.mktemp("time-scope") / "store.duckdb")
    s.remember_many([{"user_id": "tara", "content": c, "session_id": f"s{i}", "msg_seq": i, "role": "user", "ts": ts,
                      "message_id": f"tara-{i}"} for i, (ts, c) in enumerate(MESSAGES)])
    s.build(vars={"as_of": AS_OF, "time_scope_weight": WEIGHT})
    return s


def _top(store: MemoryStore, question: str) -> str:
    return store.recall(question, user_id="tara", top_k=5, min_sim=0.0, kinds=["episode"])[0].source_message_ids[0]


def test_results_carry_when_said_and_when_it_happened(store: MemoryStore) -> None:
    got = store.recall("where does the user live?", user_id="tara", top_k=10, min_sim=0.0)
    porto = next(m for m in got if m.content == "User lives in Porto")
    assert porto.said_at == datetime(2026, 6, 1, 9, 0)
    assert (porto.happened_on, porto.happened_grain) == (date(2026, 5, 1), "month")
    episode = next(m for m in got if m.kind == "episode" and "ramen place downtown" in m.content)
    assert episode.said_at == datetime(2026, 6, 10, 19, 0) and episode.happened_on is None
    d = porto.as_dict()
    assert (d["said_at"], d["happened_on"], d["happened_grain"]) == ("2026-06-01T09:00:00", "2026-05-01", "month")
    assert "- User lives in Porto (said 2026-06-01; happened 2026-05)" in store.prompt(
        ["where does the user live?"], user_id="tara", record_access=False)


@pytest.mark.parametrize(("question", "expected"), [
    ("which new ramen place did I try last week?", "tara-0"),
    ("which new ramen place did I try last month?", "tara-1"),
    ("去年我们去哪儿玩了，风景很美的那次？", "tara-2"),
    ("今年我们去哪儿玩了，风景很美的那次？", "tara-3"),
    # a month of the year: the year the question names, else as_of's year
    ("which new ramen place did I try in May?", "tara-1"),
    ("which new ramen place did I try in June 2026?", "tara-0"),
    ("2025年8月我们去哪儿玩了，风景很美的那次？", "tara-2"),
    ("四月份我们去哪儿玩了，风景很美的那次？", "tara-3"),
])
def test_a_named_time_decides_between_two_alike_memories(store: MemoryStore, question: str, expected: str) -> None:
    # the two memories of each pair read alike; only the time the question names tells them apart
    assert _top(store, question) == expected


def test_a_month_of_the_year_resolves_to_the_year_the_text_names(store: MemoryStore) -> None:
    rows = dict(query(store, "select content, happened_on from int_memories_extracted"
                             " where message_id in ('tara-5', 'tara-6')"))
    assert str(rows["User lives in Lisbon"]) == "2024-03-01"              # "in March 2024"
    assert str(rows["用户住在福州"]) == "2026-11-01"                        # 十一月份 (not 一月), said in 2026
    # "may" the verb is no month: the question has no time scope, the index may answer it
    store._reader._hybrid.check_time_scope(["may I ask which new ramen place I tried?"])


def test_the_index_leaves_time_scoped_questions_to_the_compiled_statement(store: MemoryStore) -> None:
    reader = store._reader
    store.recall("warm up", user_id="tara", record_access=False)
    assert reader.indexed and reader._hybrid is not None
    question = "which new ramen place did I try last week?"
    with pytest.raises(Unserved):
        reader._hybrid.check_time_scope([None, question])
    reader._hybrid.check_time_scope(["which new ramen place did I try?", None])  # no time named: the index answers
    s = reader.settings
    vec = [float(x) for x in embed_texts(s.embedding_model, s.embedding_query_form, [question])[0]]
    got = reader.run("tara", [vec], 5, 0.0, None, [question])[0]
    want = run_compiled(reader.connection(), s.sql_text, "tara", [vec], 5, 0.0, None, [question], None, None)[0]
    assert [m.memory_id for m in got] == [m.memory_id for m in want]
    assert [m.score for m in got] == pytest.approx([m.score for m in want], abs=1e-9)
    assert got[0].source_message_ids == ["tara-0"] and got[0].said_at == datetime(2026, 6, 10, 19, 0)


def test_the_cli_answers_with_dates_and_the_time_scope(store: MemoryStore) -> None:
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
    out = subprocess.run([EXE, "recall", "--db", str(store.paths.db), "--user", "tara", "--json", "--kind", "episode",
                          "--min-sim", "0", "--no-access", "which new ramen place did I try last week?"],
                         capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    top = json.loads(out)[0]
    assert top["source_message_ids"] == ["tara-0"] and top["said_at"] == "2026-06-10T19:00:00"
    assert top["happened_on"] is None and top["happened_grain"] is None
