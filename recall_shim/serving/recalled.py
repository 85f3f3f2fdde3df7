"""One recalled memory as every recall path returns it (the compiled statement, the serving index,
the hot tail, PostgreSQL), with its dates."""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from datetime import date, datetime, timezone
from typing import Any, Sequence

__all__ = ["RecalledMemory", "as_date", "as_datetime", "wire_fields"]


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
        """The memory as JSON (CLI, HTTP, MCP): the fields of :func:`wire_fields`, floats rounded
        to 6 places, dates as ISO text."""
        out: dict[str, Any] = {}
        for name, json_type in _WIRE_FIELDS:
            value = getattr(self, name)
            if json_type == list[str]:
                value = list(value)  # whatever sequence the store made (list, tuple, array)
            elif isinstance(value, float):
                value = round(value, 6)
            elif isinstance(value, datetime):
                value = value.isoformat(timespec="seconds")
            elif isinstance(value, date):
                value = value.isoformat()
            out[name] = value
        return out


# JSON type of each field's value in as_dict (dates are ISO text); ``intent`` is the position of
# the answer in recall_many's list, not a field of the memory
_WIRE_TYPES: dict[str, Any] = {"str": str, "float": float, "int": int, "list[str]": list[str],
                               "datetime | None": str | None, "date | None": str | None, "str | None": str | None}


def wire_fields() -> dict[str, tuple[Any, Any]]:
    """``{name: (JSON type, default)}`` of a recalled memory as the interfaces send it: the one
    definition the HTTP response model (recall_shim/interfaces/http.py) is made from."""
    out: dict[str, tuple[Any, Any]] = {}
    for f in fields(RecalledMemory):
        if f.name == "intent":
            continue
        default = ... if f.default is MISSING else f.default
        out[f.name] = (_WIRE_TYPES[str(f.type)], default)
    return out


# (name, JSON type) of the wire fields, worked out once: as_dict runs for every recalled memory
_WIRE_FIELDS: tuple[tuple[str, Any], ...] = tuple((name, spec[0]) for name, spec in wire_fields().items())


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
