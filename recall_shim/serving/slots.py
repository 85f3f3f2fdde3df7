"""Questions that ask for a slot, on the serving index (docs/recall.md "Questions that ask for a
slot"): the published (slot, pattern) pairs of seeds/question_slots.csv searched in the
lower-cased question, as the compiled statement's ``asked_slots``, and the factor per row with
the recall factor's input ``slot_asked`` at the rows of the asked slots. The weight is not
written here: ``SnapshotIndex.factor_asked`` is the snapshot's own factor expression evaluated
with slot_asked true (recall_shim/serving/formula.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from recall_shim.serving.index import SnapshotIndex

__all__ = ["SlotQuestions", "slot_factor"]


class SlotQuestions:
    """The compiled patterns of recall_queries.slot_questions."""

    def __init__(self, pairs: Sequence[tuple[str, str]]) -> None:
        self._pairs = [(slot, re.compile(pattern)) for slot, pattern in pairs]

    def asked(self, text: str | None) -> frozenset[str]:
        """The slots ``text`` asks for; none for a precomputed vector (no text)."""
        if text is None or not self._pairs:
            return frozenset()
        low = text.lower()
        return frozenset(slot for slot, pattern in self._pairs if pattern.search(low))


@dataclass(frozen=True)
class _SlotFactor:
    """A factor array's view for one question: rows whose slot code is in ``codes`` read
    ``boosted`` (the factor with slot_asked), the others ``base``; indexed like an array."""

    base: np.ndarray
    boosted: np.ndarray
    slot: np.ndarray
    codes: np.ndarray

    def __getitem__(self, rows: Any) -> np.ndarray:
        return np.where(np.isin(self.slot[rows], self.codes), self.boosted[rows], self.base[rows])


def slot_factor(index: SnapshotIndex, fac: np.ndarray, asked: frozenset[str]) -> Any:
    """The factor per row of ``index`` for a question asking for slots ``asked``: ``fac`` (its
    ``factor`` or ``factor_said``) with slot_asked at the rows of those slots; ``fac`` itself when
    no row holds one of them."""
    codes = [index.slots.index(s) for s in asked if s in index.slots]
    if not codes or index.slot is None:
        return fac
    boosted = index.factor_said_asked if fac is index.factor_said else index.factor_asked
    return _SlotFactor(fac, boosted, index.slot, np.array(codes, dtype=index.slot.dtype))
