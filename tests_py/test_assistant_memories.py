"""What the assistant said (issue 14 item 5): the shipped seeds/assistant_markers.csv on assistant
turns written for this test, English and Chinese, then one real store: recommendations,
promises and decisions of the assistant are recallable as 'assistant' memories, chit-chat and
acknowledgements of how to answer are not, and the user's own facts rank above what the
assistant said for a question about the user."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import duckdb
import pytest

from recall_shim import MemoryStore
from recall_shim.recall.prompt import KIND_TITLES, format_prompt

from .conftest import query

SEED = Path(__file__).resolve().parents[1] / "seeds" / "assistant_markers.csv"

KEPT = [
    "For a rainy week in Porto I'd suggest the Livraria Lello early in the morning and a port cellar tour.",
    "Honestly, I would go with the Kindle Paperwhite: the battery lasts weeks.",
    "You should book the ferry at least two days ahead, it sells out in July.",
    "I'll remind you on Monday to renew your passport.",
    "Here's the plan: I'd split it into three weeks of grammar and one of mock exams.",
    "My recommendation is the 14-inch model, it's lighter for commuting.",
    "我推荐你买降噪耳机，通勤的时候很有用。",
    "我建议先把信用卡还清，再开始定投。",
    "没问题，我下次帮你把菜谱整理成表格。",
    "这个预算的话，可以考虑二手的相机，性价比更高。",
]
DROPPED = [
    "Sure!",
    "Nice to meet you, Mia! How can I help you today?",
    "Got it, I'll keep my answers short from now on.",
    "Okay, I will answer in English.",
    "好的，我会用表格呈现",
    "没问题，以后都用中文回答。",
    "Thanks for sharing that, it sounds like a lovely trip!",
    "The capital of Peru is Lima.",
    "地球到太阳大约一亿五千万公里。",
]


def _markers() -> list[dict[str, str]]:
    with SEED.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _kept(text: str) -> bool:
    """The model's test (int_episodes_extracted): a keep marker and no drop marker, in lower case."""
    con = duckdb.connect()
    hits = {m["marker_id"]: (m["keep"] == "true", con.execute("select regexp_matches(lower(?), ?)",
                                                               [text, m["pattern"]]).fetchone()[0])
            for m in _markers()}
    return any(k and hit for k, hit in hits.values()) and not any(not k and hit for k, hit in hits.values())


def test_the_seed_is_well_formed() -> None:
    rows = _markers()
    assert len({r["marker_id"] for r in rows}) == len(rows)
    assert {r["keep"] for r in rows} == {"true", "false"}
    assert {r["meaning"] for r in rows} <= {"recommendation", "promise", "decision", "acknowledgement"}
    # lower case (the model matches the lower-cased message), no \b (PostgreSQL reads it as backspace)
    assert all("\\b" not in r["pattern"] and re.sub(r"\\[A-Za-z]", "", r["pattern"]).islower() for r in rows
               if re.search("[A-Za-z]", re.sub(r"\\[A-Za-z]", "", r["pattern"])))


@pytest.mark.parametrize("text", KEPT)
def test_recommendations_promises_and_decisions_are_kept(text: str) -> None:
    assert _kept(text), text


@pytest.mark.parametrize("text", DROPPED)
def test_chit_chat_and_acknowledgements_are_not(text: str) -> None:
    assert not _kept(text), text


AS_OF = "2026-03-03 00:00:00"
TURNS = [
    ("user", "2026-03-02 09:00:00", "I live in Ghent and I'm looking for a light laptop for my illustration work."),
    ("assistant", "2026-03-02 09:01:00", "For illustration on the go I'd recommend the Surface Pro 9 with the pen."),
    ("user", "2026-03-02 09:02:00", "Please keep your answers short."),
    ("assistant", "2026-03-02 09:03:00", "Got it, I'll keep my answers short."),
    ("user", "2026-03-02 09:04:00", "My dentist appointment is on the 20th."),
    ("assistant", "2026-03-02 09:05:00", "I'll remind you about the dentist appointment the day before."),
    ("assistant", "2026-03-02 09:06:00", "Nice to meet you! Have a lovely day in Ghent."),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    s = MemoryStore(Path(tmp_path_factory.mktemp("said")) / "store.duckdb")
    s.remember_many([{"user_id": "ines", "session_id": "s1", "msg_seq": i, "role": role, "content": text,
                      "ts": ts, "message_id": f"m{i}"} for i, (role, ts, text) in enumerate(TURNS)])
    s.build(vars={"as_of": AS_OF})
    return s


def test_only_marked_assistant_turns_become_assistant_memories(store: MemoryStore) -> None:
    said = query(store, "select source_message_ids from long_term_memory where kind = 'assistant' order by 1")
    assert [r[0] for r in said] == [["m1"], ["m5"]]
    # user messages are never 'assistant' memories, assistant messages are never episodes
    kinds = dict(query(store, "select source_message_ids[1], list(distinct kind) from long_term_memory group by 1"))
    assert "assistant" not in {k for m, ks in kinds.items() if m in ("m0", "m2", "m4") for k in ks}
    assert "episode" not in {k for m, ks in kinds.items() if m in ("m1", "m3", "m5", "m6") for k in ks}


def test_what_the_assistant_said_is_recallable(store: MemoryStore) -> None:
    # a question that asks what the assistant said (var assistant_question_pattern): its answer first,
    # ahead of the user's own message about the laptop
    top = store.recall("which laptop did you recommend?", user_id="ines", top_k=1, min_sim=-1)[0]
    assert top.kind == "assistant" and top.source_message_ids == ["m1"]
    top = store.recall("你之前推荐我买哪台电脑？", user_id="ines", top_k=1, min_sim=-1)[0]
    assert top.kind == "assistant" and top.source_message_ids == ["m1"]
    hits = store.recall("what did you promise to remind me about?", user_id="ines", top_k=3, min_sim=-1)
    assert ["m5"] in [h.source_message_ids for h in hits if h.kind == "assistant"]


def test_the_users_own_facts_rank_above_what_the_assistant_said(store: MemoryStore) -> None:
    for q in ("where does the user live?", "what laptop is the user looking for?"):
        top = store.recall(q, user_id="ines", top_k=1, min_sim=-1)[0]
        assert top.kind != "assistant" and top.source_message_ids == ["m0"], q


def test_the_prompt_block_shows_it_as_what_the_assistant_said(store: MemoryStore) -> None:
    hits = store.recall("which laptop did you recommend?", user_id="ines", top_k=3, min_sim=-1)
    block = format_prompt(hits)
    title = KIND_TITLES["assistant"]
    assert f"{title}:\n- For illustration on the go I'd recommend the Surface Pro 9" in block


def test_the_weight_falls_on_the_assistant_unless_the_question_asks_what_it_said(store: MemoryStore) -> None:
    """Runs last in the module: it rebuilds the store with the weight at 1 (strength as of the
    same moment, so only the weight changes). About the user: an assistant memory scores 0.5 (the
    shipped var) of its relevance; asking what the assistant said: every other memory does."""
    about_user, to_assistant = "a laptop for illustration work", "which laptop did you recommend for illustration?"
    # the conversation lift off in both: the final score is not linear in the factor
    store.build(vars={"as_of": AS_OF, "conversation_lift_weight": 0})
    weighted = [{h.memory_id: h for h in store.recall(q, user_id="ines", top_k=20, min_sim=-1)}
                for q in (about_user, to_assistant)]
    store.build(vars={"as_of": AS_OF, "assistant_memory_weight": 1.0, "conversation_lift_weight": 0})
    plain = [{h.memory_id: h for h in store.recall(q, user_id="ines", top_k=20, min_sim=-1)}
             for q in (about_user, to_assistant)]
    for asks, w, p in zip((False, True), weighted, plain):
        assert w.keys() == p.keys() and {h.kind for h in p.values()} >= {"assistant", "episode"}
        for mid, h in p.items():
            carries = (h.kind == "assistant") != asks
            assert w[mid].score == pytest.approx(h.score * (0.5 if carries else 1.0), rel=1e-6), (asks, h.content)
