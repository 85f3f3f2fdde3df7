"""Questions that ask for a slot (issue 14, docs/recall.md "Questions that ask for a slot"): "who
am I?" shares no word with "User's name is Nina" and reads like any musing about oneself, "where
do I live now?" like the earlier city. A question that matches a pattern of seeds/question_slots.csv
weighs the current memories of the slots it asks for by var slot_question_weight, on the compiled
statement, the serving index and the hot tail. Real store, real
dbt builds, the real embedding model, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recall_shim import MemoryStore
from recall_shim.common.embedding import embed_texts
from recall_shim.serving.reader import run_compiled
from tests_py.conftest import copy_store

EXE = str(Path(sys.executable).with_name("agent-memory"))
AS_OF = "2026-06-01 12:00:00"
MESSAGES = [
    ("nina", "2026-03-02 09:00:00", "Hi, I'm Nina! nice to meet you"),
    ("nina", "2026-03-02 09:05:00", "I keep asking myself who I really am since I turned forty"),
    ("nina", "2026-03-03 10:00:00", "I work as a pharmacist at a small chemist in Leeds"),
    ("nina", "2026-03-04 10:00:00", "I live in Munich."),
    ("nina", "2026-05-20 10:00:00", "I moved from Munich to Berlin last month."),
    ("nina", "2026-05-21 10:00:00", "Munich was lovely but the rent there was killing me"),
    ("fang", "2026-03-02 09:00:00", "你好，我叫王芳。"),
    ("fang", "2026-03-02 09:05:00", "周末带孩子去公园放风筝了"),
    ("fang", "2026-03-03 09:05:00", "我在一家医院做护士，已经干了十年"),
]


def _build(path: Path, weight: float | None) -> MemoryStore:
    store = MemoryStore(path)
    store.remember_many([{"user_id": u, "content": c, "session_id": f"s{i}", "msg_seq": i, "role": "user", "ts": ts,
                          "message_id": f"{u}-{i}"} for i, (u, ts, c) in enumerate(MESSAGES)])
    # the conversation lift is off: the final score is not linear in the factor, and these tests
    # check the factor's slot term by score ratios (the lift with a per-request factor:
    # test_current_questions.py, the index against the statement)
    fixed = {"as_of": AS_OF, "conversation_lift_weight": 0}
    store.build(vars=fixed if weight is None else {**fixed, "slot_question_weight": weight})
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    return _build(tmp_path_factory.mktemp("slots") / "store.duckdb", None)  # the shipped vars


@pytest.fixture(scope="module")
def off(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    return _build(tmp_path_factory.mktemp("slots-off") / "store.duckdb", 1)  # 1 turns the weighting off


def _top(store: MemoryStore, user: str, question: str) -> str:
    return store.recall(question, user_id=user, top_k=5, min_sim=0.0, record_access=False)[0].content


@pytest.mark.parametrize(("user", "question", "answer", "without"), [
    # the musing about oneself reads closer to "who am I?" than the name does
    ("nina", "who am I?", "User's name is Nina", "I keep asking myself who I really am since I turned forty"),
    # the earlier city (slot previous_home) reads as close as the current one
    ("nina", "where do I live now?", "User lives in Berlin", "User used to live in Munich"),
])
def test_a_question_for_a_slot_puts_its_current_value_first(store: MemoryStore, off: MemoryStore, user: str,
                                                             question: str, answer: str, without: str) -> None:
    assert _top(store, user, question) == answer
    assert _top(off, user, question) == without  # what the same question found without the weighting


@pytest.mark.parametrize(("user", "question", "message_id"), [
    ("nina", "what's my name again?", "nina-0"),
    ("nina", "where do I work?", "nina-2"),
    ("fang", "我叫什么名字？", "fang-6"),
    ("fang", "我是做什么工作的？", "fang-8"),
])
def test_other_phrasings_and_languages(store: MemoryStore, user: str, question: str, message_id: str) -> None:
    top = store.recall(question, user_id=user, top_k=5, min_sim=0.0, record_access=False)[0]
    assert top.source_message_ids == [message_id]  # the statement, or the memory extracted from it


def test_the_weight_applies_to_the_asked_slot_only(store: MemoryStore, off: MemoryStore) -> None:
    """A name question weighs the name memory by var slot_question_weight (2) and nothing else
    (the store without the weighting answers from the serving index: float32 cosines, 1e-5)."""
    def scores(s: MemoryStore) -> dict[str, float]:
        return {m.content: m.score for m in s.recall("who am I?", user_id="nina", top_k=20, min_sim=0.0,
                                                     record_access=False)}
    on, plain = scores(store), scores(off)
    assert set(on) == set(plain)
    for content, score in on.items():
        assert score == pytest.approx(plain[content] * (2.0 if content == "User's name is Nina" else 1.0), rel=1e-5)


def test_the_index_answers_slot_questions_as_the_compiled_statement(store: MemoryStore) -> None:
    """The serving index holds each row's slot and weighs the asked slots itself (the same
    published patterns, the factor's input slot_asked): same ids, same order, same scores."""
    reader = store._reader
    store.recall("warm up", user_id="nina", record_access=False)
    hybrid = reader._hybrid
    assert reader.indexed and hybrid is not None
    assert hybrid.asked_slots("Who am I?") == {"name"}
    assert hybrid.asked_slots("我在哪上班？") == {"job", "employer"}
    assert not hybrid.asked_slots("which chemist is in Leeds?") and not hybrid.asked_slots(None)
    hybrid.check_time_scope(["who am I?"])  # no time named: not left to the statement
    s = reader.settings
    cases = [("nina", "where do I live now?"), ("nina", "who am I?"), ("fang", "我叫什么名字？"),
             ("nina", "which chemist is in Leeds?")]
    vecs = embed_texts(s.embedding_model, s.embedding_query_form, [q for _, q in cases])
    for (user, question), vec in zip(cases, vecs):
        got = hybrid.search(reader.connection(), user, np.asarray([vec], dtype=np.float64), [question], 10, 0.0,
                            None)[0]
        want = run_compiled(reader.connection(), s.sql_text, user, [[float(x) for x in vec]], 10, 0.0, None,
                            [question], None, None)[0]
        assert [h.memory_id for h in got] == [m.memory_id for m in want], question
        assert [h.score for h in got] == pytest.approx([m.score for m in want], abs=2e-5), question
    assert store.recall("where do I live now?", user_id="nina", top_k=1, min_sim=0.0,
                        record_access=False)[0].content == "User lives in Berlin"


def test_the_hot_tail_carries_the_slot(store: MemoryStore, off: MemoryStore, tmp_path: Path) -> None:
    """A name said after the build is weighed before the next build: the tail's memories carry
    their slot to the compiled statement (through the CLI, a fresh process)."""
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}

    def tail_scores(built: MemoryStore, name: str) -> dict[str, float]:
        db = copy_store(built.paths.db, tmp_path / name)
        tailed = MemoryStore(db)
        tailed.remember("omar", "Hey, I'm Omar", session_id="t1", msg_seq=1)
        tailed.remember("omar", "Honestly I keep wondering who I am outside of work", session_id="t1", msg_seq=2)
        tailed.close()
        out = subprocess.run([EXE, "recall", "--db", str(db), "--user", "omar", "--json", "--min-sim", "0",
                              "--no-access", "who am I?"], capture_output=True, text=True, env=env, timeout=300,
                             check=True).stdout
        return {m["content"]: m["score"] for m in json.loads(out)}

    on, plain = tail_scores(store, "on"), tail_scores(off, "off")
    assert "User's name is Omar" in on and set(on) == set(plain)
    for content, score in on.items():
        # the CLI prints 6 decimals; without the weighting the tail's index path answers (float32)
        assert score == pytest.approx(plain[content] * (2.0 if content == "User's name is Omar" else 1.0), rel=2e-4)
