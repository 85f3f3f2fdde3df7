"""Lookups of keys in a sorted array, the one rule every serving path uses (index rows by id64,
lexical matches by row, IVF hits in a user's block, turn links by memory)."""

from __future__ import annotations

import numpy as np

__all__ = ["in_sorted", "positions", "positions_unsorted", "values_at"]


def positions(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The index of each of ``keys`` in ``sorted_keys`` (ascending), -1 where it is absent."""
    keys = np.asarray(keys)
    if not len(sorted_keys) or not len(keys):
        return np.full(len(keys), -1, np.int64)
    i = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return np.where(sorted_keys[i] == keys, i, -1).astype(np.int64)


def positions_unsorted(unique_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The index of each of ``keys`` in ``unique_keys`` (any order, no key twice), -1 where absent."""
    order = np.argsort(unique_keys, kind="stable")
    at = positions(np.asarray(unique_keys)[order], keys)
    return np.where(at >= 0, order[np.maximum(at, 0)], -1) if len(order) else at


def in_sorted(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether each of ``keys`` is in ``sorted_keys`` (ascending)."""
    return positions(sorted_keys, keys) >= 0


def values_at(sorted_keys: np.ndarray, values: np.ndarray, keys: np.ndarray, default: float = 0.0) -> np.ndarray:
    """The value of each of ``keys`` (``values[i]`` belongs to ``sorted_keys[i]``, ascending),
    ``default`` where the key is absent: a row's BM25 among an intent's lexical matches."""
    i = positions(sorted_keys, keys)
    if not len(sorted_keys):
        return np.full(len(i), default, dtype=np.float64)
    return np.where(i >= 0, np.asarray(values)[np.maximum(i, 0)], default)
