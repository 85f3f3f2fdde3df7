"""The conversation lift (issue 14, docs/recall.md "Conversation lift"): a memory's final score is
its score + var conversation_lift_weight (2) x the harmonic mean of its score and the best score
among the ranked memories said within var conversation_lift_turns (2) turns of it in its session,
itself included; on every recall path (the compiled statement, the serving index, the hot tail);
0 turns it off. Real stores, real dbt builds, the real embedding model."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from recall_shim import BuildFailed, MemoryStore
from recall_shim.serving import reader
from recall_shim.serving.hybrid import Unserved
from tests_py.conftest import copy_store

# the painting is described two turns after the turn that says "painting"; the bike is said in
# another session, the dentist four turns later in the same one (too far to be near)
CHAT = [
    ("t1", 1, "I took up watercolour painting this spring, every Sunday morning."),
    ("t1", 2, "Mostly the harbour at dawn, the fishing boats and the fog rolling in."),
    ("t1", 3, "My teacher says my skies are getting better."),
    ("t1", 7, "Also I have a dentist appointment on Thursday."),
    ("t2", 1, "I finally bought a second-hand road bike last weekend."),
]
QUESTION = "what does Kim like to paint?"
WEIGHT = 2.0


def _build(folder: Path, **vars: Any) -> MemoryStore:
    store = MemoryStore(folder / "store.duckdb")
    store.remember_many([{"user_id": "kim", "session_id": s, "msg_seq": n, "role": "user", "content": c,
                          "ts": f"2026-11-{10 + n} 20:00:00", "message_id": f"{s}-{n}"} for s, n, c in CHAT])
    store.build(vars=vars or None)
    return store


def _episodes(store: MemoryStore, question: str = QUESTION) -> dict[str, Any]:
    found = store.recall(question, user_id="kim", kinds=["episode"], top_k=10, min_sim=0, record_access=False)
    return {m.source_message_ids[0]: m for m in found}


def _lift(score: float, best: float) -> float:
    return score + WEIGHT * (2 * score * best / (score + best) if score + best > 0 else 0.0)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = _build(tmp_path_factory.mktemp("lift"))
    store.close()
    return store.paths.db


def test_each_memory_is_lifted_by_the_best_memory_near_it(built: Path, tmp_path: Path) -> None:
    lifted = _episodes(MemoryStore(copy_store(built, tmp_path / "on")))
    plain_store = MemoryStore(copy_store(built, tmp_path / "off"))
    plain_store.build(vars={"conversation_lift_weight": 0})
    plain = _episodes(plain_store)
    assert set(lifted) == set(plain) == {f"{s}-{n}" for s, n, _ in CHAT}
    near = {"t1-1": ["t1-1", "t1-2", "t1-3"], "t1-2": ["t1-1", "t1-2", "t1-3"], "t1-3": ["t1-1", "t1-2", "t1-3"],
            "t1-7": ["t1-7"], "t2-1": ["t2-1"]}  # within 2 turns of the same session, itself included
    for key, m in lifted.items():
        best = max(plain[k].score for k in near[key])
        assert m.score == pytest.approx(_lift(plain[key].score, best), rel=1e-6), key
    # alone in its neighbourhood: 1 + weight times its score
    assert lifted["t2-1"].score == pytest.approx(3 * plain["t2-1"].score, rel=1e-6)
    # the description of the painting rises with the turn that says "painting"
    rank = lambda got: sorted(got, key=lambda k: -got[k].score)  # noqa: E731
    assert rank(lifted)[0] == "t1-1"
    assert rank(lifted).index("t1-2") <= rank(plain).index("t1-2")
    assert lifted["t1-2"].score / lifted["t2-1"].score > plain["t1-2"].score / plain["t2-1"].score


def test_the_index_and_the_compiled_statement_agree(built: Path, tmp_path: Path) -> None:
    store = MemoryStore(copy_store(built, tmp_path / "a"))
    got = _episodes(store)
    spec = MemoryStore(copy_store(built, tmp_path / "spec"))
    for index in spec.paths.serving.glob("*.index"):
        shutil.rmtree(index)
    want = _episodes(spec)
    assert store._reader.indexed and not spec._reader.indexed
    assert [got[k].memory_id for k in sorted(got)] == [want[k].memory_id for k in sorted(want)]
    for key, m in got.items():
        assert m.score == pytest.approx(want[key].score, rel=3e-4)


def test_a_message_in_the_hot_tail_is_lifted_like_after_the_build(built: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore(copy_store(built, tmp_path / "t"))
    store.remember("kim", "Next I want to paint the lighthouse at night.", session_id="t1", msg_seq=4,
                   message_id="t1-4")
    served: list[int] = []
    real = reader.search_with_tail

    def spy(*args: Any, **kwargs: Any) -> Any:
        got = real(*args, **kwargs)  # Unserved would propagate: the index must serve the tail user
        served.append(1)
        return got

    monkeypatch.setattr(reader, "search_with_tail", spy)
    before = _episodes(store)
    assert "t1-4" in before and served, "the index did not serve the tail user"

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise Unserved("test: the compiled statement over snapshot + tail")

    monkeypatch.setattr(reader, "search_with_tail", refuse)
    compiled = _episodes(store)  # the spec: recall_sql over the snapshot's and the tail's memories
    assert set(compiled) == set(before)
    for key, m in before.items():
        assert m.score == pytest.approx(compiled[key].score, rel=3e-4), key
    monkeypatch.undo()
    store.build()
    after = _episodes(store)
    assert set(after) == set(before)
    order = lambda got: sorted(got, key=lambda k: (-got[k].score, got[k].memory_id))  # noqa: E731
    assert order(after) == order(before)
    for key, m in before.items():
        assert after[key].memory_id == m.memory_id
        assert after[key].score == pytest.approx(m.score, rel=1e-3)


def test_a_negative_weight_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildFailed) as failed:
        _build(tmp_path, conversation_lift_weight=-1)
    assert "conversation_lift_weight" in failed.value.output
