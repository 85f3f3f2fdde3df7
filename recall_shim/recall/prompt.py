"""Turn recalled memories into a system-prompt block."""

from __future__ import annotations

from datetime import timedelta
from typing import Iterable

from recall_shim.serving.recalled import RecalledMemory

KIND_TITLES = {
    "preference": "Preferences",
    "fact": "Facts",
    "skill": "Skills",
    "episode": "From earlier conversations",
    # what the assistant itself said (recommendations, promises, decisions): never a fact about the user
    "assistant": "What you (the assistant) said earlier",
}

# every line carries when it was said (``when``); a changed fact may be recalled beside the message
# that stated its old value, so the header says which one holds (issue 14 item 3: an outdated value
# is never presented as current)
DEFAULT_HEADER = ("What you remember about this user (most relevant first; each line is dated, and where two lines"
                  " disagree the later one is current):")


def when(m: RecalledMemory) -> str:
    """The memory's dates as a line suffix: `` (said 2026-03-14; happened 2026-02)``. happened_on
    is shown at its grain (day or weekday: the day; week: ``week of`` the week's Monday; month:
    ``2026-02``; year: ``2026``) and left out when it is the day it was said; "" without dates."""
    parts = []
    said = m.said_at.date() if m.said_at is not None else None
    if said is not None:
        parts.append(f"said {said.isoformat()}")
    on, grain = m.happened_on, m.happened_grain
    if on is not None and not (grain in ("day", "weekday", None) and on == said):
        if grain == "year":
            text = f"{on.year:04d}"
        elif grain == "month":
            text = f"{on.year:04d}-{on.month:02d}"
        elif grain == "week":
            text = f"week of {(on - timedelta(days=on.weekday())).isoformat()}"
        else:
            text = on.isoformat()
        parts.append(f"happened {text}")
    return f" ({'; '.join(parts)})" if parts else ""


def format_prompt(
    memories: Iterable[RecalledMemory],
    budget_chars: int = 1200,
    header: str = DEFAULT_HEADER,
) -> str:
    """Group memories by kind (preferences, facts, skills, episodes, what the assistant said, then
    others), best score first, one ``- content (said ...; happened ...)`` line each (``when``); a
    memory recalled by several intents appears once.
    Lines are added best-first until ``budget_chars`` would be exceeded (whole lines only).
    Returns "" when nothing fits or nothing was recalled."""
    best: dict[str, RecalledMemory] = {}
    for m in memories:
        if m.memory_id not in best or m.score > best[m.memory_id].score:
            best[m.memory_id] = m
    chosen: list[RecalledMemory] = []
    used = len(header) + 1
    for m in sorted(best.values(), key=lambda m: (-m.score, m.memory_id)):
        line = 2 + len(m.content) + len(when(m)) + 1
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
        lines.extend(f"- {m.content}{when(m)}" for m in group)
    return "\n".join(lines)
