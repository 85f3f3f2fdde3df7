"""Questions whose factor the serving index makes per request (docs/recall.md "Questions that ask
for a slot", "Questions about now"): a question that asks for a slot ("who am I?": the published
(slot, pattern) pairs of seeds/question_slots.csv) or for the current state ("do I still ...?":
the published current_question_pattern), both searched in the lower-cased text as the compiled
statement's ``asked_slots`` and ``addressed.asks_current``. The factor is the snapshot's own
expression (recall_shim/serving/formula.py) evaluated over the user's block with the inputs
slot_asked, recency (where a memory was said in the span of the user's scoped memories: 0 the
oldest, 1 the newest) and asks_current; no weight is written here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from recall_shim.serving.index import SnapshotIndex

__all__ = ["AskedQuestions", "question_factor"]


class AskedQuestions:
    """The compiled patterns of recall_queries.slot_questions, current_question_pattern and
    assistant_question_pattern, each searched in the lower-cased question."""

    def __init__(self, slot_pairs: Sequence[tuple[str, str]], current_pattern: str, assistant_pattern: str) -> None:
        self._pairs = [(slot, re.compile(pattern)) for slot, pattern in slot_pairs]
        self._current = _compiled(current_pattern)
        self._assistant = _compiled(assistant_pattern)

    def slots(self, text: str | None) -> frozenset[str]:
        """The slots ``text`` asks for; none for a precomputed vector (no text)."""
        if text is None or not self._pairs:
            return frozenset()
        low = text.lower()
        return frozenset(slot for slot, pattern in self._pairs if pattern.search(low))

    def current(self, text: str | None) -> bool:
        """Does ``text`` ask for the current state? Never for a precomputed vector."""
        return _matches(self._current, text)

    def assistant(self, text: str | None) -> bool:
        """Does ``text`` ask what the assistant said (the statement's ``addressed``)? Never for a
        precomputed vector."""
        return _matches(self._assistant, text)


def _compiled(pattern: str) -> re.Pattern[str] | None:
    return re.compile(pattern) if pattern else None


def _matches(pattern: re.Pattern[str] | None, text: str | None) -> bool:
    return bool(text is not None and pattern is not None and pattern.search(text.lower()))


@dataclass(frozen=True)
class _BlockFactor:
    """The factor of one question over a user's block [lo, hi), indexed by absolute row."""

    lo: int
    values: np.ndarray

    def __getitem__(self, rows: Any) -> np.ndarray:
        return self.values[np.asarray(rows) - self.lo]


def question_factor(index: SnapshotIndex, lo: int, hi: int, to_assistant: bool, slots: frozenset[str],
                    current: bool, allowed: np.ndarray) -> Any:
    """The factor per row of the user's block [lo, hi) for a question asking for ``slots`` and
    (``current``) for the current state, with kind codes ``allowed`` in scope (the span of time
    is over the scoped memories, as the statement's recency_bounds); the index's own factor array
    when the question asks for neither. Needs ``index.slot`` and ``index.said``."""
    if not slots and not current:
        return index.factor_said if to_assistant else index.factor
    assert index.slot is not None and index.said is not None
    codes = [index.slots.index(s) for s in slots if s in index.slots]
    slot_asked = np.isin(index.slot[lo:hi], codes) if codes else np.zeros(hi - lo, dtype=bool)
    recency: Any = 1.0
    if current:
        said = index.said[lo:hi]
        scope = allowed[index.kind[lo:hi]] & np.isfinite(said)
        first, last = (float(said[scope].min()), float(said[scope].max())) if scope.any() else (np.nan, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            recency = (said - first) / (last - first) if last > first else np.ones(hi - lo)
        recency = np.where(np.isfinite(recency), recency, 1.0)  # NULL time, no span: 1, the statement's coalesce
    values = index.formula.factor(strength=index.strength[lo:hi], is_question=index.question[lo:hi],
                                  is_assistant=index.assistant[lo:hi], to_assistant=to_assistant,
                                  slot_asked=slot_asked, recency=recency, asks_current=current)
    return _BlockFactor(lo, values)
