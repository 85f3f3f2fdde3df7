"""The system-prompt block: grouped by kind, best first, deduplicated, within budget."""

from __future__ import annotations

from datetime import date, datetime

from recall_shim import RecalledMemory, format_prompt


def _m(mid: str, kind: str, content: str, score: float) -> RecalledMemory:
    return RecalledMemory(mid, kind, content, score, 1.0, score, ["x"], 1)


def test_groups_by_kind_and_dedupes() -> None:
    text = format_prompt([
        _m("a", "fact", "Lives in Paris", 0.9),
        _m("b", "preference", "Prefers tables", 0.8),
        _m("a", "fact", "Lives in Paris", 0.7),
        _m("c", "skill", "Knows DuckDB", 0.6),
    ])
    lines = text.splitlines()
    assert lines[1:] == ["Preferences:", "- Prefers tables", "Facts:", "- Lives in Paris", "Skills:", "- Knows DuckDB"]
    assert text.count("Lives in Paris") == 1


def test_budget_keeps_best_whole_lines() -> None:
    mems = [_m(str(i), "fact", f"memory number {i} " + "x" * 40, 1 - i / 100) for i in range(20)]
    text = format_prompt(mems, budget_chars=300)
    assert len(text) <= 300
    assert "memory number 0 " in text and "memory number 19 " not in text
    assert format_prompt([], budget_chars=300) == ""
    assert format_prompt(mems, budget_chars=10) == ""


def _dated(mid: str, kind: str, content: str, said: str, on: str | None = None, grain: str | None = None,
           score: float = 0.9) -> RecalledMemory:
    return RecalledMemory(mid, kind, content, score, 1.0, score, ["x"], 1, said_at=datetime.fromisoformat(said),
                          happened_on=None if on is None else date.fromisoformat(on), happened_grain=grain)


def test_each_line_shows_when_it_was_said_and_when_it_happened() -> None:
    text = format_prompt([
        _dated("a", "fact", "User adopted a dog named Biscuit", "2026-03-14 10:05:00", "2026-03-01", "month", 0.9),
        _dated("b", "fact", "User hiked the Eiger last weekend", "2026-03-02 08:00:00", "2026-02-28", "week", 0.8),
        _dated("c", "skill", "用户去年学会了滑雪", "2026-01-20 12:00:00", "2025-01-01", "year", 0.7),
        _dated("d", "fact", "User flies to Riga next Friday", "2026-03-02 08:00:00", "2026-03-06", "weekday", 0.6),
        _dated("e", "episode", "we went to the lake", "2026-02-11 18:30:00", score=0.5),
        _dated("f", "fact", "User had a cold today", "2026-02-12 07:00:00", "2026-02-12", "day", 0.4),
    ])
    assert text.splitlines()[1:] == [
        "Facts:",
        "- User adopted a dog named Biscuit (said 2026-03-14; happened 2026-03)",
        "- User hiked the Eiger last weekend (said 2026-03-02; happened week of 2026-02-23)",
        "- User flies to Riga next Friday (said 2026-03-02; happened 2026-03-06)",
        "- User had a cold today (said 2026-02-12)",  # happened the day it was said: once
        "Skills:",
        "- 用户去年学会了滑雪 (said 2026-01-20; happened 2025)",
        "From earlier conversations:",
        "- we went to the lake (said 2026-02-11)",
    ]
    # the header tells the agent how to read the dates: of two lines that disagree (an old message
    # recalled beside the newer one), the later one is current
    assert text.splitlines()[0].endswith("each line is dated, and where two lines disagree the later one is current):")


def test_the_dates_count_against_the_budget() -> None:
    dated = _dated("a", "fact", "User adopted a dog named Biscuit", "2026-03-14 10:05:00", "2026-03-01", "month")
    undated = _m("a", "fact", "User adopted a dog named Biscuit", 0.9)
    fits = len(format_prompt([undated])) + 1  # the budget the undated line needs
    assert format_prompt([undated], budget_chars=fits) != ""
    assert format_prompt([dated], budget_chars=fits) == ""  # the date suffix counts: the line no longer fits
    assert format_prompt([dated], budget_chars=fits + len(" (said 2026-03-14; happened 2026-03)")) != ""
