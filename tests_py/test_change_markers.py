"""Outdated values never win (issue 14 item 3): the shipped seeds/change_markers.csv on a history
written for this test, English and Chinese. A later message announcing a change that no slot
rule catches ends the earlier episode of its topic, so recall finds the new statement first and
never the old one; what the change does not touch stays current."""

from __future__ import annotations

from pathlib import Path

import pytest

from recall_shim import MemoryStore

from .conftest import query

TURNS = [
    ("m1", "2026-01-05 08:00:00", "morning! I'm a barista at a tiny cafe and I play the cello in an orchestra"),
    ("m2", "2026-01-05 08:01:00", "my neighbour Edda waters my ficus when I travel"),
    ("m3", "2026-01-05 08:02:00", "我每天晚上都跑步五公里，风雨无阻"),
    ("m4", "2026-01-05 08:03:00", "I go bouldering on Thursdays"),
    ("m5", "2026-06-10 19:00:00", "big news, I don't play the cello with Edda anymore, my wrist can't take it"),
    ("m6", "2026-06-10 19:01:00", "还有，我膝盖受伤了，现在不跑步了，改成游泳"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    s = MemoryStore(Path(tmp_path_factory.mktemp("change")) / "store.duckdb")
    s.remember_many([{"user_id": "ode", "session_id": "s1" if ts < "2026-06" else "s2", "msg_seq": i,
                      "role": "user", "content": text, "ts": ts, "message_id": mid}
                     for i, (mid, ts, text) in enumerate(TURNS)])
    s.build(vars={"as_of": "2026-06-11 00:00:00"})
    return s


def _episodes(store: MemoryStore) -> dict[str, bool]:
    """message id -> its episode is current"""
    rows = query(store, "select source_message_ids[1], valid_to is null from long_term_memory"
                        " where user_id = 'ode' and kind = 'episode'")
    return dict(rows)


def test_the_announced_change_ends_the_old_episode_of_its_topic(store: MemoryStore) -> None:
    current = _episodes(store)
    assert current["m1"] is False       # cello: the clause "I don't play the cello anymore"
    assert current["m3"] is False       # 跑步: "现在不跑步了"
    assert current["m5"] is True and current["m6"] is True  # the announcements stay
    assert current["m2"] is True   # shares only a name with the change (Edda: capitalised, never a topic)
    assert current["m4"] is True   # shares nothing


def test_recall_finds_the_new_statement_and_not_the_old_one(store: MemoryStore) -> None:
    for q, new, topic in (("do I still play the cello?", "m5", "cello"), ("我现在还跑步吗？", "m6", "跑步")):
        hits = store.recall(q, user_id="ode", top_k=20, min_sim=-1)
        assert hits and hits[0].source_message_ids == [new], (q, [h.content for h in hits])
        # no current memory states the old value: every one naming the topic is the new message's
        assert all(h.source_message_ids == [new] for h in hits if topic in h.content), q
