"""The lexical leg of recall from the serving index: the snapshot's term index as postings arrays
beside the vector index, and the ``tokenize`` macro's terms of a query.

``build_term_postings(snapshot, previous)`` writes ``snap-X.index/terms/`` (temporary folder, then
renamed; written after ``build_index``, so a reader that finds no ``terms/`` runs the hybrid fusion
as compiled). From ``memory_term_index`` and ``memory_term_stats`` (the dbt models), per (user,
term) of the index's users, sorted like the models by (user_id, term); with ``previous`` (the older
index folder) only new and changed memories and the changed users' stats are read, the rest is
taken from its ``terms/`` (recall_shim/serving/terms_reuse.py):

    term.npy        the term (bytes, at most MAX_TERM_BYTES; longer terms are left out, and a query
                    with such a term is answered by the compiled statement)
    df.npy          document frequency (memory_term_stats.df)
    post_start.npy  offsets into the postings (len = terms + 1)
    user_terms.npy  (start, stop) term range per user of users.npy; user_docs.npy (n_docs, avg_doc_len)
    post_row.npy    index row of each posting (memories not in the index's rows are dropped, as the
                    compiled statement's scoped_memories filter drops them), post_tf.npy, post_len.npy
    meta.json       counts (terms, postings, reused_postings, read_postings, read_users), format,
                    the tokenize statement's digest: what the next build checks before reusing

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
import pyarrow as pa
import regex

from recall_shim.common.durable import fsync_files
from recall_shim.serving.index import index_dir
from recall_shim.serving.snapshot import connect_snapshot
from recall_shim.serving.terms_reuse import FORMAT, Reuse, lexicon_key, plan_reuse, row_users

MAX_TERM_BYTES = 64
_HAN = regex.compile(r"\p{Han}")
_HAN_RUNS = regex.compile(r"\p{Han}+")
_WORDS = regex.compile(r"[\p{L}\p{N}]+")
_FAST = regex.compile(r"^[\x00-\x7f\p{Han}]*$")
_VOWEL = regex.compile(r"[aeiouy]")
_DOUBLED = regex.compile(r"(bb|dd|gg|mm|nn|pp|rr|tt)$")
_E_ENDING = regex.compile(r"(iv|nc|rc|uc|ic|bl)$")
_SHORT = regex.compile(r"^[^aeiou]*[aeiou][^aeiouwxy]$")


def build_term_postings(snapshot: Path, previous: Path | None = None) -> dict[str, Any] | None:
    """Write ``snap-X.index/terms/`` from the snapshot's term index. None when the snapshot has no
    index or no term index (then hybrid recall runs as compiled). ``previous``: the older index
    folder the index was built from (``update_index``); the postings of memories unchanged since
    are taken from its ``terms/`` and only the new and changed memories' postings are read
    (recall_shim/serving/terms_reuse.py). Without it, or when it cannot be reused, everything is read."""
    started = time.monotonic()
    folder = index_dir(snapshot)
    if not (folder / "meta.json").exists():
        return None
    con = connect_snapshot(snapshot)
    try:
        names = {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()}
        if not {"memory_term_index", "memory_term_stats"} <= names:
            return None
        lexicon = lexicon_key(con)
        plan = plan_reuse(previous, folder, lexicon, MAX_TERM_BYTES)
        users = np.load(folder / "users.npy")
        stats, posts = _read(con, folder, users, plan)
    finally:
        con.close()
    read_s = time.monotonic() - started
    final = folder / "terms"
    tmp = folder / f"terms.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    out = _assemble(folder, users, stats, posts, plan, tmp)
    out.update(format=FORMAT, lexicon=lexicon, max_term_bytes=MAX_TERM_BYTES, incremental=plan is not None,
               read_seconds=round(read_s, 3), seconds=round(time.monotonic() - started, 3))
    (tmp / "meta.json").write_text(json.dumps(out))
    fsync_files(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    return out


def _read(con: duckdb.DuckDBPyConnection, folder: Path, users: np.ndarray, plan: Reuse | None) -> tuple[dict, dict]:
    """The stats rows (of the changed users; all without a plan) numbered by (user_id, term), and
    the postings (of the fresh rows; all without a plan) by that number and their index row,
    ordered by both. Postings are matched to rows by memory_id (the index's memory_id.npy): a
    hash join, no md5 per posting."""
    user_filter = ""
    if plan is not None and not plan.changed.all():
        con.register("_terms_users", pa.table({"user_id": _strings(users[plan.changed])}))
        user_filter = "and user_id in (select user_id from _terms_users)"
    con.execute(f"""create temp table g as select row_number() over (order by user_id, term) - 1 as gid,
        user_id, term, df, n_docs, avg_doc_len from memory_term_stats
        where strlen(term) <= {MAX_TERM_BYTES} {user_filter}""")
    stats = con.sql("select user_id, term, df, n_docs, avg_doc_len from g order by gid").fetchnumpy()
    memory_id = np.load(folder / "memory_id.npy", mmap_mode="r")
    rows = np.arange(len(memory_id), dtype=np.int64) if plan is None else plan.fresh
    con.register("_terms_rows", pa.table({"memory_id": _strings(memory_id[rows]), "row": pa.array(rows, pa.int64())}))
    posts = con.sql("""select g.gid, r.row, t.tf, t.doc_len from memory_term_index as t
        inner join _terms_rows as r using (memory_id) inner join g using (user_id, term)
        order by g.gid, r.row""").fetchnumpy()
    return stats, posts


def _strings(values: np.ndarray) -> pa.Array:
    """An arrow string array of numpy bytes (utf-8)."""
    return pa.array(np.asarray(values).tolist(), pa.binary()).cast(pa.string())


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated aranges [s, s + n) (vectorised)."""
    total = int(lengths.sum())
    offsets = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lengths)


def _assemble(folder: Path, users: np.ndarray, stats: dict, posts: dict, plan: Reuse | None, tmp: Path) -> dict[str, Any]:
    """Write the arrays: per index user its terms (read, or the previous ones of an unchanged
    user), the reused postings moved to their new rows and terms, merged with the read ones."""
    user_start = np.load(folder / "user_start.npy")
    id64 = np.load(folder / "id64.npy", mmap_mode="r")  # its length: the row count
    n_users = len(users)
    # the read stats rows: sorted by (user, term); each index user's range
    s_user = np.array([u.encode() for u in stats["user_id"]], dtype=bytes) if len(stats["user_id"]) else np.zeros(0, "S1")
    s_term = np.array([t.encode() for t in stats["term"]], dtype=f"S{MAX_TERM_BYTES}")
    rs, re_ = np.searchsorted(s_user, users, "left"), np.searchsorted(s_user, users, "right")
    changed = np.ones(n_users, bool) if plan is None else plan.changed
    prev = plan.prev if plan is not None else None
    p_terms = len(prev["term"]) if prev is not None else 0
    # per user: read range (offset past the previous terms in the pool) or the previous range
    starts, lengths = (rs + p_terms).astype(np.int64), (re_ - rs).astype(np.int64)
    if prev is not None:
        keep = ~changed
        pu = plan.prev_user[keep]
        starts[keep], lengths[keep] = prev["user_terms"][pu, 0], prev["user_terms"][pu, 1] - prev["user_terms"][pu, 0]
    take = _ranges(starts, lengths)
    new_start = np.cumsum(lengths) - lengths
    is_read = take >= p_terms
    term = np.empty(len(take), dtype=f"S{MAX_TERM_BYTES}")
    df = np.empty(len(take), dtype=np.float64)
    picked = take[is_read] - p_terms
    term[is_read], df[is_read] = s_term[picked], np.asarray(stats["df"], np.float64)[picked]
    docs = np.full((n_users, 2), np.nan)
    has = changed & (lengths > 0)
    docs[has] = np.stack([np.asarray(stats["n_docs"], np.float64)[rs[has]],
                          np.asarray(stats["avg_doc_len"], np.float64)[rs[has]]], axis=1)
    read_map = np.full(len(s_term), -1, dtype=np.int64)  # read stats row -> new term number
    read_map[picked] = np.flatnonzero(is_read)

    # the read postings: new term number; kept when the row is in the block of the term's user
    gid = read_map[np.asarray(posts["gid"], dtype=np.int64)] if len(posts["gid"]) else np.zeros(0, np.int64)
    rows = np.asarray(posts["row"], dtype=np.int64)
    t_user = np.where(gid >= 0, np.searchsorted(new_start[1:], gid, "right"), -1)  # user of each new term
    row_user = row_users(user_start, len(id64))
    if row_user is None:
        raise ValueError(f"the user blocks of {folder} do not cover its rows")
    ok = np.flatnonzero((t_user >= 0) & (row_user[rows] == t_user))
    f_gid, f_row = gid[ok], rows[ok]
    f_key = f_gid * (len(id64) + 1) + f_row
    if len(ok) > 1 and not (f_key[1:] > f_key[:-1]).all():  # each term's postings by row (ordered as read)
        o = np.argsort(f_key, kind="stable")
        ok, f_gid, f_row, f_key = ok[o], f_gid[o], f_row[o], f_key[o]
    f_tf, f_len = np.asarray(posts["tf"], np.float64)[ok], np.asarray(posts["doc_len"], np.float64)[ok]

    reused = 0
    if prev is not None:
        term[~is_read], df[~is_read] = prev["term"][take[~is_read]], prev["df"][take[~is_read]]
        docs[~changed] = prev["user_docs"][plan.prev_user[~changed]]
        prev_map = np.full(p_terms, -1, dtype=np.int64)  # previous term number -> new one
        prev_map[take[~is_read]] = np.flatnonzero(~is_read)
        for u in np.flatnonzero(changed & (plan.prev_user >= 0)).tolist():  # same user, terms by name
            pa_, pb = (int(x) for x in prev["user_terms"][plan.prev_user[u]])
            na, nb = int(new_start[u]), int(new_start[u] + lengths[u])
            if pa_ == pb or na == nb:
                continue
            pt = np.asarray(prev["term"][pa_:pb])
            i = np.minimum(np.searchsorted(term[na:nb], pt), nb - na - 1)
            hit = term[na:nb][i] == pt
            prev_map[pa_:pb][hit] = na + i[hit]
        p_start = np.asarray(prev["post_start"])
        r_gid = prev_map[np.repeat(np.arange(p_terms), np.diff(p_start))]
        r_row = plan.dst[np.asarray(prev["post_row"])]
        sel = np.flatnonzero((r_gid >= 0) & (r_row >= 0))
        r_gid, r_row = r_gid[sel], r_row[sel]
        r_tf, r_len = np.asarray(prev["post_tf"])[sel], np.asarray(prev["post_len"])[sel]
        key = r_gid * (len(id64) + 1) + r_row
        if len(key) > 1 and not (key[1:] > key[:-1]).all():  # rows and terms keep their order: not expected
            o = np.argsort(key, kind="stable")
            key, r_gid, r_row, r_tf, r_len = key[o], r_gid[o], r_row[o], r_tf[o], r_len[o]
        reused = len(key)
        # merge the read postings into the reused ones (both sorted by (term, row))
        mine = np.zeros(reused + len(f_gid), dtype=bool)
        mine[np.searchsorted(key, f_key) + np.arange(len(f_gid))] = True
        theirs = ~mine
        merged = []
        for r, f in ((r_gid, f_gid), (r_row, f_row), (r_tf, f_tf), (r_len, f_len)):
            m = np.empty(len(mine), dtype=r.dtype)
            m[theirs], m[mine] = r, f
            merged.append(m)
        f_gid, f_row, f_tf, f_len = merged
    counts = np.bincount(f_gid, minlength=len(term))
    np.save(tmp / "term.npy", term)
    np.save(tmp / "df.npy", df)
    np.save(tmp / "post_start.npy", np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
    np.save(tmp / "post_row.npy", f_row.astype(np.int64, copy=False))
    np.save(tmp / "post_tf.npy", f_tf.astype(np.float64, copy=False))
    np.save(tmp / "post_len.npy", f_len.astype(np.float64, copy=False))
    np.save(tmp / "user_terms.npy", np.stack([new_start, new_start + lengths], axis=1).astype(np.int64))
    np.save(tmp / "user_docs.npy", docs)
    return {"terms": len(term), "postings": len(f_gid), "rows": len(id64), "reused_postings": int(reused),
            "read_postings": len(ok), "read_users": int(changed.sum())}


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

    def df_of(self, user_index: int, term: str) -> float:
        """The user's document frequency of ``term`` in the snapshot (0 when no memory has it)."""
        a, z = (int(x) for x in self.user_terms[user_index])
        key = term.encode()
        i = a + int(np.searchsorted(self.term[a:z], key))
        return float(self.df[i]) if i < z and self.term[i] == key else 0.0

    def scores(self, user_index: int, terms: Sequence[str], k1: float, b: float,
               stats: "BM25Stats | None" = None) -> tuple[np.ndarray, np.ndarray]:
        """(rows ascending, BM25) of the user's memories matching any of ``terms`` (distinct).
        ``stats``: the statistics to score with instead of the snapshot's (the hot tail's
        memories counted in: recall_shim/serving/tail_search.py)."""
        a, z = (int(x) for x in self.user_terms[user_index])
        n_docs, avg = self.user_docs[user_index] if stats is None else (stats.n_docs, stats.avg_doc_len)
        rows, parts = [], []
        for t in set(terms):
            key = t.encode()
            if len(key) > MAX_TERM_BYTES:
                raise LookupError("a query term is longer than the stored terms")
            i = a + int(np.searchsorted(self.term[a:z], key))
            if i >= z or self.term[i] != key:
                continue
            s, e = int(self.post_start[i]), int(self.post_start[i + 1])
            df = float(self.df[i]) if stats is None else stats.df.get(t, 0.0)
            parts.append(bm25_term(np.asarray(self.post_tf[s:e]), np.asarray(self.post_len[s:e]), df, n_docs, avg,
                                   k1, b))
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


@dataclass(frozen=True)
class BM25Stats:
    """A user's BM25 statistics (memory_term_stats): documents, their mean length, df by term."""

    n_docs: float
    avg_doc_len: float
    df: dict[str, float]


def bm25_term(tf: np.ndarray, doc_len: np.ndarray, df: float, n_docs: float, avg_doc_len: float, k1: float,
              b: float) -> np.ndarray:
    """One term's BM25 per memory: the ``bm25_term`` macro (macros/lexical.sql) in numpy."""
    idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    with np.errstate(invalid="ignore", divide="ignore"):
        return idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * doc_len / (avg_doc_len if avg_doc_len else np.nan)))


def _stem(w: str) -> str:
    """The -ed / -ing rule of the ``stem_cut`` and ``stem_fix`` macros (macros/lexical.sql)."""
    if len(w) >= 5 and w.endswith("ied"):
        return w[:-3] + "y"
    if len(w) >= 6 and w.endswith("ing") and _VOWEL.search(w[:-3]):
        s = w[:-3]
    elif len(w) >= 5 and w.endswith("ed") and not w.endswith("eed") and _VOWEL.search(w[:-2]):
        s = w[:-2]
    else:
        return w
    if _DOUBLED.search(s):
        return s[:-1]
    if _E_ENDING.search(s) or _SHORT.search(s):
        return s + "e"
    return s


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
        words.append(_stem(w))
    for run in _HAN_RUNS.findall(text):
        words.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return words
