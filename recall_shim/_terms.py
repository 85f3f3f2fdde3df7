"""The lexical leg of recall from the serving index: the snapshot's term index as postings arrays
beside the vector index, and the ``tokenize`` macro's terms of a query.

``build_term_postings(snapshot)`` writes ``snap-X.index/terms/`` (temporary folder, then renamed;
written after ``build_index``, so a reader that finds no ``terms/`` runs the hybrid fusion as
compiled). From ``memory_term_index`` and ``memory_term_stats`` (the dbt models), per (user, term),
sorted like the models by (user_id, term):

    term.npy        the term (bytes, at most MAX_TERM_BYTES; longer terms are left out, and a query
                    with such a term is answered by the compiled statement)
    df.npy          document frequency (memory_term_stats.df)
    post_start.npy  offsets into the postings (len = terms + 1)
    user_terms.npy  (start, stop) term range per user of users.npy; user_docs.npy (n_docs, avg_doc_len)
    post_row.npy    index row of each posting (memories not in the index's rows are dropped, as the
                    compiled statement's scoped_memories filter drops them), post_tf.npy, post_len.npy

BM25 per (intent, memory) is then the sum over the query's distinct terms of ``bm25_term`` (the
macro, with the snapshot's lexical_k1 / lexical_b), as ``lexical_scores_sql`` computes it.

Tokenizing a query: texts of ASCII and Han characters only are tokenized here, by the same rules
as the ``tokenize`` macro (tests_py/test_hybrid_index.py checks the two agree); any other text runs
the snapshot's compiled ``tokenize`` statement, so case folding and Unicode classes stay DuckDB's.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import duckdb
import numpy as np
import regex

from ._index import index_dir
from ._snapshot import connect_snapshot

MAX_TERM_BYTES = 64
_HAN = regex.compile(r"\p{Han}")
_HAN_RUNS = regex.compile(r"\p{Han}+")
_WORDS = regex.compile(r"[\p{L}\p{N}]+")
_FAST = regex.compile(r"^[\x00-\x7f\p{Han}]*$")


def build_term_postings(snapshot: Path) -> dict[str, Any] | None:
    """Write ``snap-X.index/terms/`` from the snapshot's term index. None when the snapshot has no
    index or no term index (then hybrid recall runs as compiled)."""
    started = time.monotonic()
    folder = index_dir(snapshot)
    if not (folder / "meta.json").exists():
        return None
    con = connect_snapshot(snapshot)
    try:
        names = {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()}
        if not {"memory_term_index", "memory_term_stats"} <= names:
            return None
        final = folder / "terms"
        tmp = folder / f"terms.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        con.execute(f"""create temp table g as select row_number() over (order by user_id, term) - 1 as gid,
            user_id, term, df, n_docs, avg_doc_len from memory_term_stats
            where strlen(term) <= {MAX_TERM_BYTES}""")
        stats = con.sql("select user_id, term, df, n_docs, avg_doc_len from g order by gid").fetchnumpy()
        posts = con.sql("""select g.gid, (md5_number_upper(t.memory_id) >> 2)::bigint as id64, t.tf, t.doc_len
            from memory_term_index as t inner join g using (user_id, term) order by g.gid""").fetchnumpy()
    finally:
        con.close()
    users = np.load(folder / "users.npy")
    user_start = np.load(folder / "user_start.npy")
    id64 = np.load(folder / "id64.npy", mmap_mode="r")
    n_terms = len(stats["term"])
    t_user = np.array([u.encode() for u in stats["user_id"]], dtype=bytes)
    uidx = np.searchsorted(users, t_user) if len(users) else np.zeros(n_terms, np.int64)
    known = (uidx < len(users)) & (users[np.minimum(uidx, max(len(users) - 1, 0))] == t_user) if len(users) else uidx < 0
    gid = np.asarray(posts["gid"], dtype=np.int64)
    pid = np.asarray(posts["id64"], dtype=np.int64)
    rows = np.full(len(gid), -1, dtype=np.int64)
    p_user = uidx[gid] if len(gid) else np.zeros(0, np.int64)
    bounds = np.searchsorted(p_user, np.arange(len(users) + 1))  # postings are ordered by gid, so by user
    for u in np.flatnonzero(np.diff(bounds)):
        if not known[gid[bounds[u]]]:
            continue
        lo, hi = (int(x) for x in user_start[u])
        a, b = bounds[u], bounds[u + 1]
        block = np.asarray(id64[lo:hi])
        if not len(block):
            continue
        pos = np.minimum(np.searchsorted(block, pid[a:b]), len(block) - 1)
        rows[a:b] = np.where(block[pos] == pid[a:b], lo + pos, -1)
    keep = np.flatnonzero(rows >= 0)
    keep = keep[np.lexsort((rows[keep], gid[keep]))]  # each term's postings by row: merged, not sorted, per query
    counts = np.bincount(gid[keep], minlength=n_terms)
    np.save(tmp / "term.npy", np.array([t.encode() for t in stats["term"]], dtype=f"S{MAX_TERM_BYTES}"))
    np.save(tmp / "df.npy", np.asarray(stats["df"], dtype=np.float64))
    np.save(tmp / "post_start.npy", np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
    np.save(tmp / "post_row.npy", rows[keep])
    np.save(tmp / "post_tf.npy", np.asarray(posts["tf"], dtype=np.float64)[keep])
    np.save(tmp / "post_len.npy", np.asarray(posts["doc_len"], dtype=np.float64)[keep])
    tstart = np.searchsorted(uidx, np.arange(len(users) + 1))  # terms are ordered by user
    np.save(tmp / "user_terms.npy", np.stack([tstart[:-1], tstart[1:]], axis=1).astype(np.int64))
    docs = np.full((len(users), 2), np.nan)
    first = tstart[:-1][np.diff(tstart) > 0]
    docs[uidx[first]] = np.stack([np.asarray(stats["n_docs"], dtype=np.float64)[first],
                                  np.asarray(stats["avg_doc_len"], dtype=np.float64)[first]], axis=1)
    np.save(tmp / "user_docs.npy", docs)
    out = {"terms": int(n_terms), "postings": len(keep), "seconds": round(time.monotonic() - started, 3)}
    (tmp / "meta.json").write_text(json.dumps(out))
    for p in tmp.iterdir():
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    return out


@dataclass(frozen=True)
class Lexicon:
    """The lexical settings of the snapshot's recall statement (recall_queries)."""

    k1: float
    b: float
    stopwords: frozenset[str]
    tokenize_sql: str


class TermPostings:
    """``snap-X.index/terms/``, memory-mapped: BM25 of a user's memories for query terms."""

    def __init__(self, folder: Path, users: np.ndarray) -> None:
        terms = folder / "terms"
        if not (terms / "meta.json").exists():
            raise FileNotFoundError(f"no term postings in {folder}")
        load = lambda name: np.load(terms / f"{name}.npy", mmap_mode="r")  # noqa: E731
        self.term, self.df, self.post_start = load("term"), load("df"), load("post_start")
        self.post_row, self.post_tf, self.post_len = load("post_row"), load("post_tf"), load("post_len")
        self.user_terms, self.user_docs = np.load(terms / "user_terms.npy"), np.load(terms / "user_docs.npy")
        if len(self.user_terms) != len(users):
            raise ValueError("term postings do not match the index's users")

    def scores(self, user_index: int, terms: Sequence[str], k1: float, b: float) -> tuple[np.ndarray, np.ndarray]:
        """(rows ascending, BM25) of the user's memories matching any of ``terms`` (distinct)."""
        a, z = (int(x) for x in self.user_terms[user_index])
        n_docs, avg = self.user_docs[user_index]
        rows, parts = [], []
        for t in set(terms):
            key = t.encode()
            if len(key) > MAX_TERM_BYTES:
                raise LookupError("a query term is longer than the stored terms")
            i = a + int(np.searchsorted(self.term[a:z], key))
            if i >= z or self.term[i] != key:
                continue
            s, e = int(self.post_start[i]), int(self.post_start[i + 1])
            df, tf, dl = float(self.df[i]), np.asarray(self.post_tf[s:e]), np.asarray(self.post_len[s:e])
            idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5))
            with np.errstate(invalid="ignore", divide="ignore"):
                parts.append(idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * dl / (avg if avg else np.nan))))
            rows.append(np.asarray(self.post_row[s:e]))
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0)
        if len(rows) == 1:  # one term: its postings are stored by row
            return rows[0], parts[0]
        r, p = np.concatenate(rows), np.concatenate(parts)
        order = np.argsort(r, kind="stable")  # a merge of sorted runs (timsort)
        r, p = r[order], p[order]
        first = np.flatnonzero(np.concatenate([[True], r[1:] != r[:-1]]))
        return r[first], np.add.reduceat(p, first)


def tokenize(text: str | None, lexicon: Lexicon, con: duckdb.DuckDBPyConnection) -> list[str]:
    """The ``tokenize`` macro's terms of ``text`` (macros/lexical.sql)."""
    if text is None:
        return []
    if not _FAST.match(text):
        row = con.execute(lexicon.tokenize_sql, [text]).fetchall()
        return list(row[0][0] or []) if row else []
    words = []
    for w in _WORDS.findall(_HAN.sub(" ", text).lower()):
        if w in lexicon.stopwords:
            continue
        if len(w) > 4 and w.endswith("ies"):
            w = w[:-3] + "y"
        elif len(w) > 3 and w.endswith("s") and not w.endswith("ss") and not w.endswith("us"):
            w = w[:-1]
        words.append(w)
    for run in _HAN_RUNS.findall(text):
        words.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return words
