"""The system-prompt block: grouped by kind, best first, deduplicated, within budget."""

from __future__ import annotations

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
