"""Turn context (issue 14, docs/recall.md "Turn context"): a memory's lexical leg adds the BM25 of
its session's neighbouring episodes (the turn before at var lexical_context_prev_weight 0.5, the
turn after at var lexical_context_next_weight 0.3), on every recall path: the compiled statement,
the serving index, the hot tail; forgetting the neighbour takes its share with it; 0 and 0 turn it
off. Real stores, real dbt builds, the real embedding model."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from recall_shim import BuildFailed, MemoryStore
from tests_py.conftest import copy_store

# what someone says when asked, and the question asked just before: the answer shares no word with
# "what calms Kim down?", the question does
CHAT = [
    ("t1", 1, "My sister keeps asking me what calms me down after a long shift."),
    ("t1", 2, "Watching the sunset from the old pier, every single evening."),
    ("t2", 1, "I finally bought a second-hand road bike last weekend."),
]
QUESTION = "what calms Kim down after work?"


def _build(folder: Path, **vars: Any) -> MemoryStore:
    store = MemoryStore(folder / "store.duckdb")
    store.remember_many([{"user_id": "kim", "session_id": s, "msg_seq": n, "role": "user", "content": c,
                          "ts": f"2026-11-2{n} 20:00:00", "message_id": f"{s}-{n}"} for s, n, c in CHAT])
    store.build(vars=vars or None)
    return store


def _episodes(store: MemoryStore, question: str = QUESTION) -> dict[str, Any]:
    found = store.recall(question, user_id="kim", kinds=["episode"], top_k=10, min_sim=0)
    return {m.source_message_ids[0]: m for m in found}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = _build(tmp_path_factory.mktemp("ctx"))
    store.close()
    return store.paths.db


def test_the_answer_is_found_through_the_question_before_it(built: Path, tmp_path: Path) -> None:
    store = MemoryStore(copy_store(built, tmp_path / "a"))
    got = _episodes(store)
    question, answer, bike = got["t1-1"], got["t1-2"], got["t2-1"]
    assert question.lexical_score > 0
    # the answer lends the question nothing here (no query term), the question lends it half its own
    assert answer.lexical_score == pytest.approx(0.5 * question.lexical_score, rel=1e-9)
    assert bike.lexical_score == 0  # another session: no neighbour
    # the serving index and the compiled statement (a store without an index runs it) agree
    spec = MemoryStore(copy_store(built, tmp_path / "spec"))
    for index in spec.paths.serving.glob("*.index"):
        shutil.rmtree(index)
    want = _episodes(spec)
    assert store._reader.indexed and not spec._reader.indexed
    for key, m in got.items():
        assert m.lexical_score == pytest.approx(want[key].lexical_score, rel=1e-9, abs=1e-12)
        assert m.score == pytest.approx(want[key].score, rel=3e-4)


def test_both_weights_zero_turn_it_off(tmp_path: Path) -> None:
    store = _build(tmp_path, lexical_context_prev_weight=0, lexical_context_next_weight=0)
    got = _episodes(store)
    assert got["t1-1"].lexical_score > 0 and got["t1-2"].lexical_score == 0


def test_forgetting_the_neighbour_takes_its_share_with_it(built: Path, tmp_path: Path) -> None:
    store = MemoryStore(copy_store(built, tmp_path / "f"))
    question = _episodes(store)["t1-1"]
    store.forget(memory_id=question.memory_id, user_id="kim", actor="test")
    assert _episodes(store)["t1-2"].lexical_score == 0
    store.build()
    got = _episodes(store)
    assert "t1-1" not in got and got["t1-2"].lexical_score == 0


def test_a_message_in_the_hot_tail_lends_and_borrows_like_after_the_build(built: Path, tmp_path: Path) -> None:
    store = MemoryStore(copy_store(built, tmp_path / "t"))
    store.remember("kim", "It is honestly the best part of my whole day.", session_id="t1", msg_seq=3,
                   message_id="t1-3")
    asked = "sunset from the old pier"
    before = _episodes(store, asked)
    # only the answer (t1-2) shares terms with the question: the tail's episode after it borrows
    # half of its score, the question before it 0.3
    answer = before["t1-2"].lexical_score
    assert answer > 0
    assert before["t1-3"].lexical_score == pytest.approx(0.5 * answer, rel=1e-9)
    assert before["t1-1"].lexical_score == pytest.approx(0.3 * answer, rel=1e-9)
    store.build()
    after = _episodes(store, asked)
    assert set(after) == set(before)
    for key, m in before.items():
        assert after[key].memory_id == m.memory_id
        assert after[key].lexical_score == pytest.approx(m.lexical_score, rel=1e-9, abs=1e-12)


def test_a_negative_weight_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildFailed) as failed:
        _build(tmp_path, lexical_context_prev_weight=-1)
    assert "lexical_context_prev_weight" in failed.value.output
