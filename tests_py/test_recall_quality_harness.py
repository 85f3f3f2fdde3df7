"""The recall-quality yardsticks' own parts, without a build: the LoCoMo loader and its session-log
mapping (on a tiny LoCoMo-shaped file written here, never the real one), the date parsing, the
probe-file loader and its validation, the metrics on hand-made ranked lists, and the options that
measure candidate settings (--try) on a store kept from the previous run (--reuse)."""

from __future__ import annotations

import json
import math
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.recall_quality import locomo, metrics, probes, runner  # noqa: E402


def turn(speaker: str, dia: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia, "text": text, **extra}


TINY_LOCOMO = [
    {
        "sample_id": "conv-a",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [turn("Ann", "D1:1", "I adopted a puppy yesterday."),
                          turn("Bob", "D1:2", "Look at my garden!", blip_caption="a photo of roses", img_url=["x"])],
            "session_2_date_time": "11:59 pm on 10 May, 2023",
            "session_2": [turn("Bob", "D2:1", "I started pottery."), turn("Ann", "D2:2", "Cool!")],
            "session_3_date_time": "9:00 am on 1 June, 2023",  # a date_time without turns, as in conv-26
            "session_3": [],
        },
        "qa": [
            {"question": "When did Ann adopt a puppy?", "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
            {"question": "What do Ann and Bob do?", "answer": "x", "evidence": ["D1:1; D2:1"], "category": 1},
            {"question": "Would Bob like clay?", "answer": "yes", "evidence": ["D:2:01", "D"], "category": 3},
            {"question": "What did Bob start?", "answer": "pottery", "evidence": ["D2:1", "D2:1"], "category": 4},
            {"question": "What did Bob say about cars?", "adversarial_answer": "x", "evidence": ["D1:2"], "category": 5},
            {"question": "Is Ann an ally?", "answer": "yes", "evidence": [], "category": 3},
        ],
    },
    {
        "sample_id": "conv-b",
        "conversation": {
            "speaker_a": "Cy", "speaker_b": "Di",
            "session_1_date_time": "10:04 am on 19 December, 2023",
            "session_1": [turn("Cy", "D1:1", "I run marathons.")],
        },
        "qa": [{"question": "What does Cy do?", "answer": "runs", "evidence": ["D1:1"], "category": 4}],
    },
]


@pytest.fixture
def tiny_locomo(tmp_path: Path) -> locomo.Locomo:
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(TINY_LOCOMO), encoding="utf-8")
    return locomo.load_locomo(path)


@pytest.mark.parametrize("text, expected", [
    ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
    ("12:04 am on 1 January, 2024", datetime(2024, 1, 1, 0, 4)),
    ("12:30 pm on 20 July, 2023", datetime(2023, 7, 20, 12, 30)),
    ("10:04 AM on 19 December, 2023", datetime(2023, 12, 19, 10, 4)),
])
def test_locomo_dates_parse(text: str, expected: datetime) -> None:
    assert locomo.parse_locomo_datetime(text) == expected


@pytest.mark.parametrize("text", ["8 May 2023", "25:00 pm on 8 May, 2023", "1:56 pm on 31 February, 2023", ""])
def test_locomo_bad_dates_are_refused(text: str) -> None:
    with pytest.raises(locomo.LocomoFormatError, match="unparseable session date_time"):
        locomo.parse_locomo_datetime(text)


def test_locomo_category_names_follow_the_paper() -> None:
    assert locomo.CATEGORY_NAMES == {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop"}
    assert locomo.SKIPPED_CATEGORIES == {5: "adversarial"}


def test_locomo_loader_keeps_categories_1_to_4_with_evidence(tiny_locomo: locomo.Locomo) -> None:
    qs = {q.question: q for q in tiny_locomo.questions}
    assert [q.question_id for q in tiny_locomo.questions] == ["conv-a#q1", "conv-a#q2", "conv-a#q3", "conv-a#q4", "conv-b#q1"]
    assert tiny_locomo.skipped == {"category 5 (adversarial)": 1, "no evidence naming a turn": 1}
    assert qs["When did Ann adopt a puppy?"].category == "temporal"
    assert qs["What do Ann and Bob do?"].category == "multi_hop"
    # one entry holding two ids is split; evidence ids become message ids of their conversation
    assert qs["What do Ann and Bob do?"].evidence == ["conv-a:D1:1", "conv-a:D2:1"]
    # typo'd ids are repaired, ids naming no turn are dropped and kept aside
    assert qs["Would Bob like clay?"].evidence == ["conv-a:D2:1"]
    assert qs["Would Bob like clay?"].dropped_evidence == ["D"]
    assert qs["What did Bob start?"].evidence == ["conv-a:D2:1"]  # repeats collapse
    assert qs["What does Cy do?"].sample_id == "conv-b"
    # the empty session_3 is not a session
    assert [s.number for s in tiny_locomo.conversations[0].sessions] == [1, 2]


def test_locomo_session_log_mapping(tiny_locomo: locomo.Locomo) -> None:
    rows, as_of = locomo.to_session_log(tiny_locomo, "text")
    assert len(rows) == 5
    assert {r["role"] for r in rows} == {"user"}
    by_id = {r["message_id"]: r for r in rows}
    assert set(by_id) == {"conv-a:D1:1", "conv-a:D1:2", "conv-a:D2:1", "conv-a:D2:2", "conv-b:D1:1"}
    # conv-b ends latest (19 Dec 2023) and keeps its dates; as_of is midnight after that day
    assert by_id["conv-b:D1:1"]["ts"] == "2023-12-19 10:04:00"
    assert as_of == "2023-12-20 00:00:00"
    # conv-a keeps its own calendar (the questions name dates): turns a minute apart from the
    # session's date_time, the last one 23:59 + 1 min on 10 May = 11 May 00:00
    assert by_id["conv-a:D2:2"]["ts"] == "2023-05-11 00:00:00"
    assert by_id["conv-a:D2:1"]["ts"] == "2023-05-10 23:59:00"
    assert by_id["conv-a:D1:1"]["ts"] == "2023-05-08 13:56:00"
    assert by_id["conv-a:D1:2"]["ts"] == "2023-05-08 13:57:00"
    assert by_id["conv-a:D1:2"] | {} == {"user_id": "conv-a", "session_id": "conv-a:session_1", "msg_seq": 2,
                                         "role": "user", "content": "Look at my garden! [shares a photo of roses]",
                                         "ts": "2023-05-08 13:57:00", "message_id": "conv-a:D1:2"}
    named, _ = locomo.to_session_log(tiny_locomo, "speaker")
    assert [r["content"] for r in named][:2] == ["Ann: I adopted a puppy yesterday.",
                                                 "Bob: Look at my garden! [shares a photo of roses]"]
    # the mapping before captions: the photo is dropped, every other field the same
    plain, _ = locomo.to_session_log(tiny_locomo, "text", images="none")
    assert [r["content"] for r in plain] == ["I adopted a puppy yesterday.", "Look at my garden!",
                                             "I started pottery.", "Cool!", "I run marathons."]
    assert [{k: v for k, v in r.items() if k != "content"} for r in plain] == \
        [{k: v for k, v in r.items() if k != "content"} for r in rows]
    with pytest.raises(ValueError, match="content_form"):
        locomo.to_session_log(tiny_locomo, "caption")
    with pytest.raises(ValueError, match="images"):
        locomo.to_session_log(tiny_locomo, "text", images="alt")


def test_locomo_requests_have_no_threshold(tiny_locomo: locomo.Locomo) -> None:
    req = locomo.recall_requests(tiny_locomo, 10)
    assert req[0] == {"id": "conv-a#q1", "user_id": "conv-a", "query": "When did Ann adopt a puppy?",
                      "top_k": 10, "min_sim": -1}


@pytest.mark.parametrize("data, message", [
    ({"not": "a list"}, "non-empty JSON list"),
    ([{"sample_id": "c", "conversation": {"session_1": [turn("A", "D1:1", "hi")]}}], "has no session_1_date_time"),
    ([{"sample_id": "c", "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023",
                                          "session_1": [{"speaker": "A", "text": "hi"}]}}], "string speaker, dia_id"),
    ([{"sample_id": "c", "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [turn("A", "D1:1", "x")]},
       "qa": [{"question": "q", "evidence": ["D1:1"], "category": 9}]}], "unknown category 9"),
])
def test_locomo_bad_files_get_a_clear_error(tmp_path: Path, data: Any, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(locomo.LocomoFormatError, match=message):
        locomo.load_locomo(path)


def probe_file(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "about": "test",
        "asked_at": "2026-09-01 12:00:00",
        "users": [
            {"user_id": "anna", "sessions": [
                {"session_id": "anna-s1", "started_at": "2026-02-03 09:12:00", "messages": [
                    {"id": "anna-s1-1", "role": "user", "content": "Hi, I'm Anna, I live in Graz."},
                    {"id": "anna-s1-2", "role": "assistant", "content": "Hi Anna!"}]},
                {"session_id": "anna-s2", "started_at": "2026-05-03 10:00:00", "messages": [
                    {"id": "anna-s2-1", "role": "user", "content": "I moved to Vienna."}]}]},
            {"user_id": "bo", "sessions": [
                {"session_id": "bo-s1", "started_at": "2026-03-01 08:00:00", "messages": [
                    {"id": "bo-s1-1", "role": "user", "content": "我叫波。"}]}]},
        ],
        "probes": [
            {"id": "anna-city", "user_id": "anna", "lang": "en", "category": "home", "question": "where do I live?",
             "answer": "Vienna", "expect": ["anna-s2-1"], "outdated": ["anna-s1-1"]},
            {"id": "bo-name", "user_id": "bo", "lang": "zh", "category": "identity", "question": "我叫什么？",
             "answer": "波", "expect": ["bo-s1-1"], "outdated": []},
        ],
    }
    data.update(changes)
    return data


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "everyday.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_probe_loader_builds_the_session_log(tmp_path: Path) -> None:
    ps = probes.load_probes(write(tmp_path, probe_file()))
    assert ps.asked_at == "2026-09-01 12:00:00"
    assert [(r["message_id"], r["msg_seq"], r["ts"], r["role"]) for r in ps.messages] == [
        ("anna-s1-1", 1, "2026-02-03 09:12:00", "user"),
        ("anna-s1-2", 2, "2026-02-03 09:13:00", "assistant"),
        ("anna-s2-1", 1, "2026-05-03 10:00:00", "user"),
        ("bo-s1-1", 1, "2026-03-01 08:00:00", "user"),
    ]
    assert ps.owner["bo-s1-1"] == "bo"
    assert [(p.probe_id, p.expect, p.outdated) for p in ps.probes] == [
        ("anna-city", ["anna-s2-1"], ["anna-s1-1"]), ("bo-name", ["bo-s1-1"], [])]


def test_probe_validation_names_every_problem(tmp_path: Path) -> None:
    data = probe_file()
    data["users"][1]["sessions"][0]["messages"].append({"id": "anna-s1-1", "role": "user", "content": "dup"})
    data["users"][1]["sessions"][0]["messages"].append({"id": "bo-s1-3", "role": "system", "content": "x"})
    data["users"][1]["sessions"].append({"session_id": "bo-s2", "started_at": "2026-09-01 12:00:00",
                                         "messages": [{"id": "bo-s2-1", "role": "user", "content": "late"}]})
    data["probes"] += [
        {"id": "p-unknown", "user_id": "anna", "lang": "en", "category": "home", "question": "q",
         "expect": ["nope-1"], "outdated": []},
        {"id": "p-foreign", "user_id": "anna", "lang": "en", "category": "home", "question": "q",
         "expect": ["bo-s1-1"], "outdated": []},
        {"id": "p-lang", "user_id": "bo", "lang": "fr", "category": "chess", "question": "q",
         "expect": ["bo-s1-1"], "outdated": ["bo-s1-1"]},
        {"id": "p-nouser", "user_id": "zed", "lang": "en", "category": "home", "question": "q", "expect": []},
        {"id": "bo-name", "user_id": "bo", "lang": "zh", "category": "identity", "question": "q", "expect": ["bo-s1-1"]},
    ]
    with pytest.raises(probes.ProbeFormatError) as err:
        probes.load_probes(write(tmp_path, data))
    text = str(err.value)
    for expected in ["message anna-s1-1: id used twice", "message bo-s1-3: role must be one of",
                     "message bo-s2-1: at 2026-09-01 12:00:00 is not before asked_at",
                     "probe p-unknown: expect id nope-1 names no message",
                     "probe p-foreign: expect id bo-s1-1 belongs to user bo, not anna",
                     "probe p-lang: lang must be one of", "probe p-lang: unknown category 'chess'",
                     "probe p-lang: ids both expected and outdated", "probe p-nouser: unknown user_id 'zed'",
                     "probe p-nouser: expect needs at least one message id", "probe bo-name: id used twice"]:
        assert expected in text


@pytest.mark.parametrize("content, message", [("{", "cannot read probe file"), ("[]", "top level must be a JSON object")])
def test_probe_file_unreadable(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(probes.ProbeFormatError, match=message):
        probes.load_probes(path)


def ranked(*sources: list[str]) -> list[dict[str, Any]]:
    return [{"source_message_ids": s, "content": f"memory {i}"} for i, s in enumerate(sources)]


def test_any_and_frac_at_k() -> None:
    res = ranked(["x"], ["e1", "y"], ["z"], ["e2"], ["e1"])
    m = metrics.score_question({"e1", "e2", "e3"}, res, [1, 2, 5])
    assert m["any@1"] == 0.0 and m["any@2"] == 1.0 and m["any@5"] == 1.0
    assert m["frac@1"] == 0.0
    assert m["frac@2"] == pytest.approx(1 / 3)
    assert m["frac@5"] == pytest.approx(2 / 3)  # e1 twice counts once
    assert m["mrr"] == 0.5
    assert metrics.score_question({"e"}, [], [1])["any@1"] == 0.0
    with pytest.raises(ValueError):
        metrics.score_question(set(), res, [1])


def test_ndcg_counts_each_evidence_message_once() -> None:
    # several memories derived from the same evidence message (as an extracted fact, its episode
    # and a clause of it are): only the first is a hit, so a perfect list scores 1, never more
    one = ranked(["e1"], ["e1"], ["e1", "x"], ["y"])
    assert metrics.score_question({"e1"}, one, [10])["ndcg@10"] == pytest.approx(1.0)
    two = ranked(["e1"], ["e2"], ["e1"], ["e2"], ["e1", "e2"])
    assert metrics.score_question({"e1", "e2"}, two, [10])["ndcg@10"] == pytest.approx(1.0)
    # a memory from both messages is one gain; a repeat of a covered message adds nothing
    both = ranked(["e1", "e2"], ["e1"], ["e2"], ["e3"])
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert metrics.score_question({"e1", "e2", "e3"}, both, [10])["ndcg@10"] == pytest.approx(
        (1 + 1 / math.log2(5)) / ideal)
    late = ranked(["x"], ["e1"], ["e1"])
    assert metrics.score_question({"e1"}, late, [10])["ndcg@10"] == pytest.approx(1 / math.log2(3))
    for res in (one, two, both, late, ranked(*[["e1"]] * 12)):
        assert metrics.score_question({"e1", "e2", "e3"}, res, [10])["ndcg@10"] <= 1.0


def test_top_n_and_outdated_above_current() -> None:
    old_first = ranked(["old"], ["new"], ["x"])
    assert not metrics.top_n({"new"}, old_first, 1) and metrics.top_n({"new"}, old_first, 3)
    assert metrics.outdated_above_current({"new"}, {"old"}, old_first)
    assert not metrics.outdated_above_current({"new"}, {"old"}, ranked(["new"], ["old"]))
    # the outdated memory recalled, no current one at all: a failure
    assert metrics.outdated_above_current({"new"}, {"old"}, ranked(["x"], ["old"]))
    # neither recalled, or no outdated ids: not a failure
    assert not metrics.outdated_above_current({"new"}, {"old"}, ranked(["x"]))
    assert not metrics.outdated_above_current({"new"}, set(), old_first)
    # a memory derived from both the old and the new message counts as current
    assert not metrics.outdated_above_current({"new"}, {"old"}, ranked(["old", "new"], ["old"]))


def test_mean_by_group_counts_only_applicable_rows() -> None:
    rows = [(("overall", "en"), {"top-1": 1.0, "outdated above current": 1.0}),
            (("overall", "zh"), {"top-1": 0.0}),
            (("overall", "en"), {"top-1": 0.0, "outdated above current": 0.0})]
    g = metrics.mean_by_group(rows)
    assert g["overall"]["n"] == 3 and g["overall"]["top-1"] == pytest.approx(1 / 3)
    assert g["overall"]["outdated above current"] == 0.5 and g["overall"]["n:outdated above current"] == 2
    assert "outdated above current" not in g["zh"]
    table = metrics.table("t", ["a"], {"a": g}, ["overall", "zh", "missing"], ["top-1", "outdated above current"])
    assert "| overall (n=3) | outdated above current (n=2) | 0.500 |" in table
    assert "missing" not in table
    two = metrics.table("t", ["a", "b"], {"a": g, "b": metrics.mean_by_group(rows[:1])}, ["overall"],
                        ["top-1", "outdated above current"])
    assert "| overall (n=3) | top-1 | 0.333 | **1.000** |" in two
    assert "| overall (n=3) | outdated above current (n=2) | **0.500** | 1.000 |" in two  # lower is better


def test_score_probe_and_prompt_states_both(tmp_path: Path) -> None:
    ps = probes.load_probes(write(tmp_path, probe_file()))
    city = ps.probes[0]
    res = ranked(["anna-s1-1"], ["anna-s2-1"])
    assert probes.score_probe(city, res) == {"top-1": 0.0, "top-3": 1.0, "outdated above current": 1.0}
    assert "outdated above current" not in probes.score_probe(ps.probes[1], ranked(["bo-s1-1"]))
    prompt = "What you remember about this user:\nFrom earlier conversations:\n- memory 0\n- memory 1"
    assert probes.prompt_states_both(city, prompt, res)
    assert not probes.prompt_states_both(city, prompt.rsplit("\n", 1)[0], res)


def test_try_settings_parse_or_are_refused() -> None:
    assert runner.parse_try('sw 0.1={"strength_weight": 0.1}') == ("sw 0.1", {"strength_weight": 0.1})
    assert runner.parse_try(' a = {}') == ("a", {})
    for bad, message in (("no-equals", "LABEL=JSON"), ('={"a": 1}', "LABEL=JSON"), ("x={bad", "not JSON"),
                         ("x=[1]", "JSON object")):
        with pytest.raises(ValueError, match=message):
            runner.parse_try(bad)


def test_a_store_is_reused_only_when_asked_and_present(tmp_path: Path) -> None:
    db = tmp_path / "set.duckdb"
    assert not runner.existing_store(db, reuse=True)   # nothing built yet: ingest
    db.write_bytes(b"")
    assert runner.existing_store(db, reuse=True)
    assert not runner.existing_store(db, reuse=False)  # the default run starts from scratch
