"""One recalled memory as every recall path returns it (the compiled statement, the serving index,
the hot tail, PostgreSQL), with its dates."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, Sequence

__all__ = ["RecalledMemory", "as_date", "as_datetime"]


@dataclass(frozen=True)
class RecalledMemory:
    """One recalled memory. ``similarity`` is raw cosine, ``lexical_score`` BM25 (0 when no term
    matched), ``score`` the fused relevance weighted by strength (docs/recall.md). Dates, outside
    the score: ``said_at`` when the memory was first said (long_term_memory.created_at, the
    earliest source message's time, UTC), ``happened_on`` / ``happened_grain`` when the text says
    it happened (day, week, month, year or weekday; None when it does not say)."""

    memory_id: str
    kind: str
    content: str
    similarity: float
    strength: float
    score: float
    source_message_ids: list[str]
    rank: int
    intent: int = 0
    lexical_score: float = 0.0
    said_at: datetime | None = None
    happened_on: date | None = None
    happened_grain: str | None = None

    @classmethod
    def of_row(cls, row: Sequence[Any]) -> "RecalledMemory | None":
        """From a row of the compiled statement (macros/recall.sql recall_sql's columns, intent_id
        1-based); None for a row whose similarity, strength or score is not a finite number."""
        intent_id, rank, memory_id, kind, content, sim, strength, score, sources, lexical = row[:10]
        # a snapshot published before recall returned dates has 10 columns: no dates until rebuilt
        said, on, grain = tuple(row[10:13]) if len(row) >= 13 else (None, None, None)
        if any(x is None or not math.isfinite(float(x)) for x in (sim, strength, score)):
            return None
        return cls(memory_id, kind, content, float(sim), float(strength), float(score), list(sources or []),
                   int(rank), int(intent_id) - 1, float(lexical or 0.0), as_datetime(said), as_date(on), grain)

    def as_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "kind": self.kind,
            "content": self.content,
            "similarity": round(self.similarity, 6),
            "strength": round(self.strength, 6),
            "score": round(self.score, 6),
            "lexical_score": round(self.lexical_score, 6),
            "source_message_ids": list(self.source_message_ids),
            "rank": self.rank,
            "said_at": None if self.said_at is None else self.said_at.isoformat(timespec="seconds"),
            "happened_on": None if self.happened_on is None else self.happened_on.isoformat(),
            "happened_grain": self.happened_grain,
        }


def as_datetime(value: Any) -> datetime | None:
    """A timestamp as the stores return it (datetime, or ISO text from an index payload) as a
    naive UTC datetime; None stays None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).replace(tzinfo=None) if value.tzinfo else value
    return as_datetime(datetime.fromisoformat(str(value)))


def as_date(value: Any) -> date | None:
    """A date as the stores return it (date, datetime or ISO text); None stays None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])
