"""The one lookup rule of serving (recall_shim/serving/lookup.py): where a key sits in a sorted
array, absent keys included, and empty arrays on either side."""

from __future__ import annotations

import numpy as np

from recall_shim.serving.lookup import in_sorted, positions, positions_unsorted, values_at


def test_positions_find_present_keys_and_mark_absent_ones() -> None:
    keys = np.array([3, 7, 11], dtype=np.int64)
    assert positions(keys, np.array([7, 3, 4, 11, 12, 0])).tolist() == [1, 0, -1, 2, -1, -1]
    assert in_sorted(keys, np.array([11, 5])).tolist() == [True, False]
    assert positions(np.array([], dtype=np.int64), np.array([1, 2])).tolist() == [-1, -1]
    assert positions(keys, np.array([], dtype=np.int64)).tolist() == []


def test_positions_unsorted_index_the_original_order() -> None:
    unique = np.array(["m9", "m1", "m5"])
    assert positions_unsorted(unique, np.array(["m5", "m2", "m9", "m1"])).tolist() == [2, -1, 0, 1]
    assert positions_unsorted(np.array([], dtype=str), np.array(["m1"])).tolist() == [-1]


def test_values_at_give_each_key_its_value_or_the_default() -> None:
    rows, bm25 = np.array([2, 5, 9]), np.array([0.5, 1.5, 2.5])
    assert values_at(rows, bm25, np.array([9, 1, 5, 2])).tolist() == [2.5, 0.0, 1.5, 0.5]
    assert values_at(rows, bm25, np.array([4]), default=-1.0).tolist() == [-1.0]
    assert values_at(np.array([], dtype=np.int64), np.array([]), np.array([3, 4])).tolist() == [0.0, 0.0]
