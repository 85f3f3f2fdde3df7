"""Turn context in the serving index and the hot tail: the shares of BM25 that a memory's
neighbour episodes lend to its lexical leg (macros/turn_context.sql is the rule; docs/recall.md
"Turn context"). Which memory lends to which, and at what weight, is not decided here: the
snapshot's published ``turn_links`` statement says so (the index build runs it over the snapshot,
the tail's worker over the snapshot's memories of a tail user plus the tail's). Here the shares
are only added: own BM25 + weight x the neighbour's own BM25, as the compiled statement's
``lexical_leg`` sums them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["TurnLinks"]

_EMPTY = np.zeros(0, np.int64)


@dataclass(frozen=True)
class TurnLinks:
    """Links as rows: ``src`` lends ``weight`` x its own BM25 to ``dst``; sorted by ``src``."""

    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray

    @classmethod
    def empty(cls) -> "TurnLinks":
        return cls(_EMPTY, _EMPTY, np.zeros(0))

    @classmethod
    def of(cls, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> "TurnLinks":
        """From unsorted arrays (rows >= 0 valid; a pair with a negative row is dropped)."""
        src, dst, weight = (np.asarray(a) for a in (src, dst, weight))
        ok = (src >= 0) & (dst >= 0)
        src, dst, weight = src[ok].astype(np.int64), dst[ok].astype(np.int64), weight[ok].astype(np.float64)
        order = np.lexsort((dst, src))
        return cls(src[order], dst[order], weight[order])

    def save(self, folder: Path) -> None:
        np.save(folder / "ctx_src.npy", self.src)
        np.save(folder / "ctx_dst.npy", self.dst)
        np.save(folder / "ctx_weight.npy", self.weight)

    @classmethod
    def load(cls, folder: Path) -> "TurnLinks":
        if not (folder / "ctx_src.npy").exists():
            return cls.empty()
        return cls(np.load(folder / "ctx_src.npy"), np.load(folder / "ctx_dst.npy"), np.load(folder / "ctx_weight.npy"))

    def __len__(self) -> int:
        return len(self.src)

    def add(self, rows: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Own BM25 (``rows`` ascending, unique; ``score``) plus the shares it lends, as (rows
        ascending, score): a row matched only through a neighbour appears with its share."""
        if not len(rows) or not len(self.src):
            return rows, score
        lo = np.searchsorted(self.src, rows, "left")
        counts = np.searchsorted(self.src, rows, "right") - lo
        n = int(counts.sum())
        if not n:
            return rows, score
        starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)  # per share: its link's offset
        idx = starts + np.arange(n)
        receivers = self.dst[idx]
        shares = self.weight[idx] * np.repeat(score, counts)
        every = np.concatenate([rows, receivers])
        values = np.concatenate([score, shares])
        order = np.argsort(every, kind="stable")  # own score first, then the shares
        every, values = every[order], values[order]
        first = np.flatnonzero(np.concatenate([[True], every[1:] != every[:-1]]))
        return every[first], np.add.reduceat(values, first)
