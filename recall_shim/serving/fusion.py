"""Which fusion a snapshot's recall statement was compiled with (recall_queries), as the serving
index's hybrid searcher (recall_shim/serving/hybrid.py) needs it for its candidate search; the
score itself is the snapshot's published formula (recall_shim/serving/formula.py)."""

from __future__ import annotations

from dataclasses import dataclass
import json
from typing import Any

from recall_shim.serving.terms import Lexicon

__all__ = ["HYBRID_FUSIONS", "Fusion", "fusion_of"]

HYBRID_FUSIONS = ("weighted", "lexical", "rrf")


@dataclass(frozen=True)
class Fusion:
    """Which fusion the snapshot's recall statement was compiled with (recall_queries), for the
    candidate search; the score itself is ``SnapshotIndex.formula``."""

    method: str
    episodes_by_default: bool = True
    # questions that ask what the assistant said (var assistant_question_pattern): '' = none
    assistant_question_pattern: str = ""
    # questions that may name a time (recall_queries.time_scope_pattern): '' = time scope off
    time_scope_pattern: str = ""
    # (slot, pattern) of the questions that ask for a slot (recall_queries.slot_questions, the rows
    # of seeds/question_slots.csv): () = slot weighting off
    slot_questions: tuple[tuple[str, str], ...] = ()
    # questions that ask for the current state (recall_queries.current_question_pattern): '' = off
    current_question_pattern: str = ""


def fusion_of(rows: dict[str, dict[str, Any]]) -> tuple[Fusion, Lexicon] | None:
    """The Fusion and Lexicon of a snapshot's recall_queries rows (by query_name), or None for a
    snapshot published before they were (then hybrid recall runs as compiled)."""
    try:
        row = rows["recall"]
        fusion = Fusion(str(row["fusion_method"]), bool(row["recall_episodes_by_default"]),
                        str(row.get("assistant_question_pattern") or ""), str(row.get("time_scope_pattern") or ""),
                        _pairs(row.get("slot_questions")), str(row.get("current_question_pattern") or ""))
        lexicon = Lexicon(float(row["lexical_k1"]), float(row["lexical_b"]), frozenset(row["lexical_stopwords"]),
                          str(rows["tokenize"]["sql_text"]))
        return fusion, lexicon
    except (KeyError, TypeError, ValueError):
        return None


def _pairs(text: Any) -> tuple[tuple[str, str], ...]:
    """recall_queries.slot_questions: a JSON array of [slot, pattern] ('' or NULL: none)."""
    return tuple((str(slot), str(pattern)) for slot, pattern in json.loads(text or "[]"))
