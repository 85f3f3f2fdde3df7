"""Incremental term postings (recall_shim/serving/terms.py): which rows, terms and users of the previous
index folder's ``terms/`` the next build can take over instead of reading them from the snapshot.

A memory's postings (its terms, tf, doc_len) are a function of its content and of the ``tokenize``
macro; the index's fingerprint (fp.npy, recall_shim/serving/index_reuse.py) covers the content. So a row
of the new index whose (user, id64, fp) the previous index holds keeps its previous postings, moved
to its new row number; only the postings of new and changed memories are read from the snapshot
(a join of memory_term_index with their memory_ids), and the postings of memories that left are
dropped. A user whose rows are all reused (same count, none fresh) is *unchanged*: its terms, df
and (n_docs, avg_doc_len) are the previous ones; only the changed users' rows of
memory_term_stats are read. Reuse needs the previous ``terms/`` in this FORMAT, written with the
same ``tokenize`` statement (recall_queries) and MAX_TERM_BYTES, over the previous folder's rows.

Assumed, as the dbt models guarantee: memory_term_stats has a row for every (user_id, term) of
memory_term_index, and both cover exactly the current memories; a previous build that dropped a
posting for lack of its stats row would otherwise keep it dropped while a full build would not.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from recall_shim.serving.index_reuse import MAX_FRESH_SHARE
from recall_shim.serving.lookup import positions, positions_unsorted

FORMAT = 2  # terms/meta.json "format": 2 = terms of users outside the index left out; reusable
ARRAYS = ("term", "df", "post_start", "post_row", "post_tf", "post_len", "user_terms", "user_docs")


def lexicon_key(con: duckdb.DuckDBPyConnection) -> str:
    """Digest of the snapshot's compiled ``tokenize`` statement: postings built with another
    tokenizer are not reused."""
    row = con.execute("select any_value(sql_text) from recall_queries where query_name = 'tokenize'").fetchall()
    return hashlib.sha256(str(row[0][0] if row else "").encode()).hexdigest()[:16]


@dataclass
class Reuse:
    """What the new index (rows sorted by (user, id64)) takes from the previous folder's terms/."""

    dst: np.ndarray         # previous row -> new row (-1: the memory left, moved or changed)
    fresh: np.ndarray       # the new rows whose postings are read from the snapshot
    changed: np.ndarray     # per new user: its stats (terms, df, n_docs) are read from the snapshot
    prev_user: np.ndarray   # per new user: its index among the previous users (-1: a new user)
    prev: dict[str, np.ndarray]  # the previous terms/ arrays (memory-mapped)


def row_users(user_start: np.ndarray, n: int) -> np.ndarray | None:
    """User index of every row (blocks are contiguous and cover the rows)."""
    order = np.argsort(user_start[:, 0], kind="stable")
    lengths = (user_start[:, 1] - user_start[:, 0])[order]
    starts = user_start[order, 0]
    if lengths.sum() != n or (len(order) and (starts[0] != 0 or (starts[1:] != user_start[order[:-1], 1]).any())):
        return None
    return np.repeat(order, lengths).astype(np.int64)


def _load_previous(previous: Path, lexicon: str, max_term_bytes: int) -> dict[str, Any] | None:
    terms = previous / "terms"
    try:
        meta = json.loads((terms / "meta.json").read_text())
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
        return None
    if (meta.get("format"), meta.get("lexicon"), meta.get("max_term_bytes")) != (FORMAT, lexicon, max_term_bytes):
        return None
    needed = [terms / f"{a}.npy" for a in ARRAYS] + [previous / f"{a}.npy" for a in ("id64", "fp", "users", "user_start")]
    if not all(p.exists() for p in needed):
        return None
    out = {a: np.load(terms / f"{a}.npy", mmap_mode="r") for a in ARRAYS}
    out.update(id64=np.load(previous / "id64.npy"), fp=np.load(previous / "fp.npy"),
               users=np.load(previous / "users.npy"), user_start=np.load(previous / "user_start.npy"))
    if meta.get("rows") != len(out["id64"]) or len(out["user_terms"]) != len(out["users"]):
        return None  # terms/ of another version of the folder
    return out


def plan_reuse(previous: Path | None, folder: Path, lexicon: str, max_term_bytes: int) -> Reuse | None:
    """The reuse plan from ``previous`` (an older index folder) to ``folder`` (the new one, whose
    id64 / fp / users / user_start are written). None when nothing usable is there or most rows
    changed: the caller reads everything."""
    if previous is None:
        return None
    prev = _load_previous(previous, lexicon, max_term_bytes)
    if prev is None or not all((folder / f"{a}.npy").exists() for a in ("fp", "memory_id")):
        return None
    id64, fp = np.load(folder / "id64.npy"), np.load(folder / "fp.npy")
    users, user_start = np.load(folder / "users.npy"), np.load(folder / "user_start.npy")
    n, pn = len(id64), len(prev["id64"])
    row_user, prev_row_user = row_users(user_start, n), row_users(prev["user_start"], pn)
    if row_user is None or prev_row_user is None or len(fp) != n or len(prev["fp"]) != pn:
        return None
    # previous user index -> new user index (-1: gone), and back
    user_map = positions(users, prev["users"])
    prev_user = np.full(len(users), -1, dtype=np.int64)
    prev_user[user_map[user_map >= 0]] = np.flatnonzero(user_map >= 0)
    # every new row matched to the previous index by id64 (memory_ids are unique), same fp and user
    src = np.full(n, -1, dtype=np.int64)
    if pn and n:
        at = positions_unsorted(prev["id64"], id64)
        cand = np.maximum(at, 0)
        same = (at >= 0) & (prev["fp"][cand] == fp) & (user_map[prev_row_user[cand]] == row_user)
        src[same] = cand[same]
    fresh = np.flatnonzero(src < 0)
    if n and len(fresh) > MAX_FRESH_SHARE * n:
        return None
    dst = np.full(pn, -1, dtype=np.int64)
    dst[src[src >= 0]] = np.flatnonzero(src >= 0)
    counts = user_start[:, 1] - user_start[:, 0]
    prev_counts = prev["user_start"][:, 1] - prev["user_start"][:, 0]
    same_count = (prev_user >= 0) & (prev_counts[np.maximum(prev_user, 0)] == counts)
    changed = ~same_count | (np.bincount(row_user[fresh], minlength=len(users)) > 0)
    return Reuse(dst=dst, fresh=fresh, changed=changed, prev_user=prev_user,
                 prev={a: prev[a] for a in ARRAYS})
