"""Turn recalled memories into a system-prompt block."""

from __future__ import annotations

from typing import Iterable

from recall_shim.serving.reader import RecalledMemory

KIND_TITLES = {
    "preference": "Preferences",
    "fact": "Facts",
    "skill": "Skills",
    "episode": "From earlier conversations",
    # what the assistant itself said (recommendations, promises, decisions): never a fact about the user
    "assistant": "What you (the assistant) said earlier",
}

DEFAULT_HEADER = "What you remember about this user (most relevant first):"


def format_prompt(
    memories: Iterable[RecalledMemory],
    budget_chars: int = 1200,
    header: str = DEFAULT_HEADER,
) -> str:
    """Group memories by kind (preferences, facts, skills, episodes, what the assistant said, then
    others), best score first, one ``- content`` line each; a memory recalled by several intents appears once.
    Lines are added best-first until ``budget_chars`` would be exceeded (whole lines only).
    Returns "" when nothing fits or nothing was recalled."""
    best: dict[str, RecalledMemory] = {}
    for m in memories:
        if m.memory_id not in best or m.score > best[m.memory_id].score:
            best[m.memory_id] = m
    chosen: list[RecalledMemory] = []
    used = len(header) + 1
    for m in sorted(best.values(), key=lambda m: (-m.score, m.memory_id)):
        line = 2 + len(m.content) + 1
        title = KIND_TITLES.get(m.kind, m.kind.capitalize())
        extra = 0 if any(c.kind == m.kind for c in chosen) else len(title) + 2
        if used + line + extra > budget_chars:
            continue
        used += line + extra
        chosen.append(m)
    if not chosen:
        return ""
    order = list(KIND_TITLES) + sorted({m.kind for m in chosen} - set(KIND_TITLES))
    lines = [header]
    for kind in order:
        group = [m for m in chosen if m.kind == kind]
        if not group:
            continue
        lines.append(f"{KIND_TITLES.get(kind, kind.capitalize())}:")
        lines.extend(f"- {m.content}" for m in group)
    return "\n".join(lines)
