"""The conversation lift in the serving index and the hot tail: which memories are near each other
in a conversation (macros/recall.sql ``recall_lift`` is the rule; docs/recall.md "Conversation
lift"). Two memories are near when they belong to one user, were said in one session
(turn_session_id) and their turns (turn_seq) are at most the snapshot's
``conversation_lift_turns`` apart; every memory is near itself. A memory's final score is the
published lift expression of its score and ``best``, the best score among the ranked memories near
it (the compiled statement's ``neighbourhood``). Here only the neighbourhoods are found and the
maximum taken; the expression is the snapshot's (formula.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recall_shim.serving.lookup import values_at

__all__ = ["TurnWindows", "best_near"]

_EMPTY = np.zeros(0, np.int64)


@dataclass(frozen=True)
class TurnWindows:
    """Rows by conversation: ``order`` holds the rows with a turn sorted by (group, turn_seq),
    a group being one user's session; row r's near rows are ``order[lo[r]:hi[r]]`` (lo = hi = -1:
    no turn, near only itself)."""

    order: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def empty(cls, n: int) -> "TurnWindows":
        return cls(_EMPTY, np.full(n, -1, np.int64), np.full(n, -1, np.int64))

    @classmethod
    def build(cls, n: int, rows: np.ndarray, group: np.ndarray, seq: np.ndarray, turns: int) -> "TurnWindows":
        """From the rows that have a turn (``rows`` unique, any order), their group codes (one per
        user and session) and turn numbers; ``n`` rows in all."""
        rows, group, seq = (np.asarray(a, np.int64) for a in (rows, group, seq))
        by = np.lexsort((rows, seq, group))
        order, g, s = rows[by], group[by], seq[by]
        lo, hi = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        if len(order):
            # one sortable key per position: group major, turn minor (turns clipped to 31 bits, so
            # a window never reaches into the next group)
            key = g * (1 << 32) + np.clip(s, 0, (1 << 31) - 1)
            lo[order] = np.searchsorted(key, key - turns, "left")
            hi[order] = np.searchsorted(key, key + turns, "right")
        return cls(order, lo, hi)

    def save(self, folder: Path) -> None:
        np.save(folder / "win_order.npy", self.order)
        np.save(folder / "win_lo.npy", self.lo)
        np.save(folder / "win_hi.npy", self.hi)

    @classmethod
    def load(cls, folder: Path) -> "TurnWindows | None":
        """The folder's windows; None for an index written before them (the lift then runs as
        compiled)."""
        if not (folder / "win_order.npy").exists():
            return None
        return cls(np.load(folder / "win_order.npy"), np.load(folder / "win_lo.npy"), np.load(folder / "win_hi.npy"))

    def near(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every (owner position, near row) pair of ``rows``: positions into ``rows``, each row near
        itself first."""
        rows = np.asarray(rows, np.int64)
        lo, hi = self.lo[rows], self.hi[rows]
        counts = np.where(lo >= 0, hi - lo, 0)
        n = int(counts.sum())
        owners = np.repeat(np.arange(len(rows)), counts)
        at = np.repeat(lo, counts) + (np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts))
        return (np.concatenate([np.arange(len(rows)), owners]),
                np.concatenate([rows, self.order[at] if n else _EMPTY]))

    def widen(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` and every row near one of them, ascending, unique."""
        return np.unique(self.near(rows)[1]) if len(rows) else _EMPTY


def best_near(windows: TurnWindows, rows: np.ndarray, lenders: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: the best score among the lenders near it (``lenders`` ascending with
    their ``scores``: the memories ranked for the intent; a row that is not a lender, and has no
    lender near it, gets -inf)."""
    owner, near = windows.near(rows)
    got = values_at(lenders, scores, near, default=-np.inf)
    out = np.full(len(rows), -np.inf)
    np.maximum.at(out, owner, got)
    return out
