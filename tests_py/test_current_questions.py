"""Questions about now (issue 14 item 3, docs/recall.md "Questions about now"): "do I still drink
espresso?" after "I quit caffeine entirely" said months after "I drink four espressos a day". No
rule ends the old statement (the two share no word), so without help the old one, closer to the
question, comes first. A question that matches var current_question_pattern weighs each memory by
1 + (current_question_weight - 1) x its recency (0 the user's oldest memory, 1 the newest), on the
compiled statement and the serving index alike. Real store, real dbt builds, the real embedding
model, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from recall_shim import MemoryStore
from recall_shim.common.embedding import embed_texts
from recall_shim.serving.reader import run_compiled

EXE = str(Path(sys.executable).with_name("agent-memory"))
AS_OF = "2026-06-01 12:00:00"
OLD = "I drink like four espressos a day, can't function without them"
NEW = "I quit caffeine entirely last month, only herbal tea for me now"
MESSAGES = [
    ("2026-01-05 08:00:00", OLD),
    ("2026-02-10 19:00:00", "We adopted a grey cat from the shelter, she sleeps on my keyboard"),
    ("2026-03-15 07:30:00", "Training for the spring half marathon, long run every Sunday"),
    ("2026-04-02 12:00:00", "Lunch was a huge bowl of ramen at the place near the office"),
    ("2026-05-20 09:00:00", NEW),
]


def _build(path: Path, weight: float | None) -> MemoryStore:
    store = MemoryStore(path)
    store.remember_many([{"user_id": "lena", "content": c, "session_id": f"s{i}", "msg_seq": i, "role": "user",
                          "ts": ts, "message_id": f"lena-{i}"} for i, (ts, c) in enumerate(MESSAGES)])
    store.build(vars={"as_of": AS_OF} if weight is None else {"as_of": AS_OF, "current_question_weight": weight})
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    return _build(tmp_path_factory.mktemp("now") / "store.duckdb", None)  # shipped: 2


@pytest.fixture(scope="module")
def off(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    return _build(tmp_path_factory.mktemp("now-off") / "store.duckdb", 1)  # 1 turns it off


def _scores(store: MemoryStore, question: str) -> dict[str, tuple[float, datetime]]:
    got = store.recall(question, user_id="lena", top_k=100, min_sim=-1.0, record_access=False)
    return {m.content: (m.score, m.said_at) for m in got}


def test_a_question_about_now_puts_the_newer_statement_first(store: MemoryStore, off: MemoryStore) -> None:
    for question in ("do I still drink espresso?", "am I still drinking espresso every day?"):
        assert store.recall(question, user_id="lena", top_k=3, min_sim=0.0, record_access=False)[0].content == NEW
        assert off.recall(question, user_id="lena", top_k=3, min_sim=0.0, record_access=False)[0].content == OLD


def test_the_weight_follows_recency_and_only_for_questions_about_now(store: MemoryStore, off: MemoryStore) -> None:
    question = "do I still drink espresso?"
    on, plain = _scores(store, question), _scores(off, question)
    assert set(on) == set(plain) and len(on) >= len(MESSAGES)
    first = min(t for _, t in on.values()).timestamp()
    last = max(t for _, t in on.values()).timestamp()
    for content, (score, said) in on.items():
        recency = (said.timestamp() - first) / (last - first)
        assert score == pytest.approx(plain[content][0] * (1 + (2 - 1) * recency), rel=1e-5), content
    # the same words without asking for the current state: no weight
    assert {c: s for c, (s, _) in _scores(store, "do I drink espresso?").items()} == pytest.approx(
        {c: s for c, (s, _) in _scores(off, "do I drink espresso?").items()}, rel=1e-9)


def test_the_index_answers_as_the_compiled_statement(store: MemoryStore) -> None:
    reader = store._reader
    store.recall("warm up", user_id="lena", record_access=False)
    hybrid = reader._hybrid
    assert reader.indexed and hybrid is not None
    assert hybrid.asks_current("Do I STILL drink espresso?") and hybrid.asks_current("我现在住哪儿？")
    assert not hybrid.asks_current("what do I drink?") and not hybrid.asks_current(None)
    s = reader.settings
    cases = ["do I still drink espresso?", "where do I live now?", "what's my cat like?"]
    vecs = embed_texts(s.embedding_model, s.embedding_query_form, cases)
    for kinds in (None, ["episode"], ["fact", "preference"]):
        for question, vec in zip(cases, vecs):
            got = hybrid.search(reader.connection(), "lena", np.asarray([vec], dtype=np.float64), [question], 10, -1.0,
                                kinds)[0]
            want = run_compiled(reader.connection(), s.sql_text, "lena", [[float(x) for x in vec]], 10, -1.0, kinds,
                                [question], None, None)[0]
            assert [h.memory_id for h in got] == [m.memory_id for m in want], (question, kinds)
            # float32 cosines in the statement, float64 in the index: ~1e-5, up to 5 x that after
            # the conversation lift (1 + 2 x its weight)
            assert [h.score for h in got] == pytest.approx([m.score for m in want], abs=1e-4), (question, kinds)


def test_the_cli_answers_the_current_statement(store: MemoryStore) -> None:
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
    out = subprocess.run([EXE, "recall", "--db", str(store.paths.db), "--user", "lena", "--json", "--min-sim", "0",
                          "--no-access", "do I still drink espresso?"], capture_output=True, text=True, env=env,
                         timeout=300, check=True).stdout
    assert json.loads(out)[0]["content"] == NEW
