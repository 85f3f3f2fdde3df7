"""Recall of a user with hot-tail memories from the serving index plus the tail's arrays, scored
with the snapshot's published expressions (recall_shim/serving/formula.py: ``recall_relevance``,
``recall_factor`` and ``recall_score`` of macros/recall.sql; nothing of the score is written here).

The tail's memories of one user are a ``UserTail`` (immutable arrays, made by the tail's worker:
recall_shim/serving/tail.py). ``search_with_tail`` answers the ``weighted`` fusion (the shipped
default) over the snapshot's memories of the user and the tail's together, as the compiled
statement over both would: the min-max of the cosine runs over both, and BM25's statistics are
the user's over both (n_docs, avg_doc_len and df: the snapshot's, from the term postings, plus the
tail's, which the published ``tail_term_stats`` statement computed over the tail's term rows: a
count and a mean over a union are the sums of the parts). The snapshot's rows are scanned as the
hybrid searcher's exact path scans them (float32 screening, float64 re-rank of what may reach the
top k; a user with an IVF is scanned exactly too, since the tail moves every memory's min-max and
BM25 statistics); every tail memory is scored exactly. Other fusions raise Unserved (the caller
runs the compiled statement over snapshot + tail: recall_shim/serving/tail_compiled.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import duckdb
import numpy as np

from recall_shim.serving.context import TurnLinks
from recall_shim.serving.hybrid import HybridSearcher, Unserved
from recall_shim.serving.index import TIE_MARGIN, Hit, Payload, row_dots
from recall_shim.serving.lookup import positions, values_at
from recall_shim.serving.recalled import as_date, as_datetime
from recall_shim.serving.terms import BM25Stats, bm25_term, tokenize
from recall_shim.serving.window import TurnWindows, best_near

__all__ = ["TailState", "UserTail", "search_with_tail"]


@dataclass(frozen=True, eq=False)
class UserTail:
    """One user's visible tail memories (not held by the snapshot, not folded into another).
    Compared by identity: a sync that remade a user's tail publishes a new state."""

    memory_id: list[str]
    kind: list[str | None]
    content: list[str]
    sources: list[list[str]]
    said_at: list[Any]          # created_at (datetime) per memory
    happened_on: list[Any]      # date or None
    happened_grain: list[str | None]
    strength: np.ndarray        # float64, as of when the tail was made
    is_question: np.ndarray     # bool
    vectors: np.ndarray         # float32 (n, dim)
    norm: np.ndarray            # float64 L2 norms (0: never ranks), as the index computes them
    doc_len: np.ndarray         # float64 terms per memory (0: no term)
    postings: dict[str, tuple[np.ndarray, np.ndarray]]  # term -> (positions, tf)
    n_docs: float               # the tail's memory_term_stats (published tail_term_stats)
    avg_doc_len: float
    df: dict[str, float]
    rows: list[dict[str, Any]] = field(default_factory=list)       # the memory rows (compiled path)
    term_rows: list[dict[str, Any]] = field(default_factory=list)  # their memory_term_index rows
    # the turn context's links of the user over the snapshot and the tail (published turn_links:
    # user_id, memory_id, neighbour_id, weight, id64, neighbour_id64), None without the turn context
    links: dict[str, np.ndarray] | None = None
    # the turns of the user's snapshot memories and of these (tail.py _turns: memory_id, id64,
    # session, seq) and the conversation lift's turns: None when the lift is off
    turns: dict[str, np.ndarray] | None = None
    lift_turns: int | None = None
    _turns: dict[tuple[str, int, int], TurnLinks] = field(default_factory=dict, repr=False)
    _windows: dict[tuple[str, int, int], TurnWindows] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, memories: list[dict[str, Any]], terms: list[dict[str, Any]], stats: list[dict[str, Any]],
           columns: Sequence[str], links: dict[str, np.ndarray] | None = None,
           turns: dict[str, np.ndarray] | None = None, lift_turns: int | None = None) -> "UserTail":
        """From the tail's memory rows, term rows and term statistics of one user."""
        pos = {m["memory_id"]: i for i, m in enumerate(memories)}
        vectors = np.asarray([m["embedding"] for m in memories], dtype=np.float32).reshape(len(memories), -1)
        x = vectors.astype(np.float64)
        norm = np.sqrt(np.einsum("ij,ij->i", x, x))
        norm[~np.isfinite(norm)] = 0.0
        doc_len = np.zeros(len(memories))
        by_term: dict[str, tuple[list[int], list[float]]] = {}
        for t in terms:
            i = pos[t["memory_id"]]
            doc_len[i] = float(t["doc_len"])
            p, tf = by_term.setdefault(t["term"], ([], []))
            p.append(i)
            tf.append(float(t["tf"]))
        return cls(
            memory_id=[m["memory_id"] for m in memories], kind=[m["kind"] for m in memories],
            content=[m["content"] for m in memories], sources=[list(m["source_message_ids"] or []) for m in memories],
            said_at=[m.get("created_at") for m in memories], happened_on=[m.get("happened_on") for m in memories],
            happened_grain=[m.get("happened_grain") for m in memories],
            strength=np.asarray([m["strength"] for m in memories], dtype=np.float64),
            is_question=np.asarray([bool(m["is_question"]) for m in memories]), vectors=vectors, norm=norm,
            doc_len=doc_len,
            postings={t: (np.asarray(p, dtype=np.int64), np.asarray(tf)) for t, (p, tf) in by_term.items()},
            n_docs=float(stats[0]["n_docs"]) if stats else 0.0,
            avg_doc_len=float(stats[0]["avg_doc_len"]) if stats else 0.0,
            df={s["term"]: float(s["df"]) for s in stats},
            rows=[{c: m.get(c) for c in columns} for m in memories], term_rows=list(terms), links=links,
            turns=turns, lift_turns=lift_turns)

    def payload_of(self, p: int) -> Payload:
        """Tail memory ``p``'s payload, as the index's payload_of gives a snapshot row's."""
        return Payload(self.content[p], self.sources[p], as_datetime(self.said_at[p]), as_date(self.happened_on[p]),
                       self.happened_grain[p])

    def in_scope(self, kinds: Sequence[str] | None, episodes_by_default: bool) -> np.ndarray:
        """The compiled statement's scoped_memories kind filter (as HybridSearcher.allowed_kinds)."""
        if kinds is None:
            ok = np.ones(len(self.kind), dtype=bool)
            if not episodes_by_default:
                ok &= np.array([k is not None and k != "episode" for k in self.kind], dtype=bool)
            return ok
        wanted = set(kinds)
        return np.array([k in wanted for k in self.kind], dtype=bool)

    def turn_links(self, ix: Any, lo: int, hi: int) -> TurnLinks:
        """The links in block positions: the snapshot's row r of the user's block [lo, hi) is
        r - lo, tail memory p is (hi - lo) + p (links to memories in neither are dropped)."""
        key = (str(ix.folder), lo, hi)
        if key not in self._turns:
            out = TurnLinks.empty()
            if self.links is not None and len(self.links["weight"]):
                pos = {m: i for i, m in enumerate(self.memory_id)}
                block = np.asarray(ix.id64[lo:hi])

                def place(ids: np.ndarray, keys: np.ndarray) -> np.ndarray:
                    at = np.array([hi - lo + pos[m] if m in pos else -1 for m in ids.tolist()], dtype=np.int64)
                    rest = np.flatnonzero(at < 0)
                    at[rest] = positions(block, keys[rest])
                    return at

                out = TurnLinks.of(place(self.links["neighbour_id"], self.links["neighbour_id64"]),
                                   place(self.links["memory_id"], self.links["id64"]), self.links["weight"])
            self._turns[key] = out
        return self._turns[key]

    def windows(self, ix: Any, lo: int, hi: int) -> TurnWindows | None:
        """The conversation lift's windows in block positions (as turn_links), None when the
        lift is off for this tail."""
        if self.lift_turns is None or self.turns is None:
            return None
        key = (str(ix.folder), lo, hi)
        if key not in self._windows:
            nb = hi - lo
            pos = {m: i for i, m in enumerate(self.memory_id)}
            at = np.array([nb + pos[m] if m in pos else -1 for m in self.turns["memory_id"].tolist()], dtype=np.int64)
            rest = np.flatnonzero(at < 0)
            at[rest] = positions(np.asarray(ix.id64[lo:hi]), self.turns["id64"][rest])
            keep = at >= 0
            group = np.unique(self.turns["session"][keep].astype(str), return_inverse=True)[1].reshape(-1)
            self._windows[key] = TurnWindows.build(nb + len(self.memory_id), at[keep], group,
                                                   self.turns["seq"][keep], self.lift_turns)
        return self._windows[key]

    def bm25(self, terms: Sequence[str], stats: BM25Stats, k1: float, b: float) -> np.ndarray:
        out = np.zeros(len(self.memory_id))
        for t in set(terms):
            if t in self.postings:
                p, tf = self.postings[t]
                out[p] += bm25_term(tf, self.doc_len[p], stats.df.get(t, 0.0), stats.n_docs, stats.avg_doc_len, k1, b)
        return out


@dataclass(frozen=True)
class TailState:
    """What the tail holds, made against one snapshot having seen the tombstones of one stamp of
    the forget folder (immutable: a sync publishes a new one)."""

    snapshot: Path | None = None
    forget_stamp: tuple[int, int] | None = None
    users: dict[str, UserTail] = field(default_factory=dict)
    dim: int = 0
    stats_sql: str | None = None


def _stats(searcher: HybridSearcher, u: int | None, terms: Sequence[str], tail: UserTail) -> BM25Stats:
    """The user's BM25 statistics over the snapshot's memories and the tail's."""
    n_s, avg_s = (float(x) for x in searcher.postings.user_docs[u]) if u is not None else (0.0, 0.0)
    if not np.isfinite(n_s) or not np.isfinite(avg_s):  # a user without any term in the snapshot
        n_s, avg_s = 0.0, 0.0
    n = n_s + tail.n_docs
    avg = (n_s * avg_s + tail.n_docs * tail.avg_doc_len) / n if n else 0.0
    df = {t: (searcher.postings.df_of(u, t) if u is not None else 0.0) + tail.df.get(t, 0.0) for t in set(terms)}
    return BM25Stats(n, avg, df)


def _with_context(links: TurnLinks, lo: int, hi: int, l_rows: np.ndarray, l_score: np.ndarray,
                  ls_t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The snapshot's and the tail's own BM25 plus the turn context's shares (context.py)."""
    if not len(links):
        return l_rows, l_score, ls_t
    nb = hi - lo
    matched_t = np.flatnonzero(ls_t)
    rows, score = links.add(np.concatenate([l_rows - lo, nb + matched_t]), np.concatenate([l_score, ls_t[matched_t]]))
    snap = rows < nb
    out_t = np.zeros(len(ls_t))
    out_t[rows[~snap] - nb] = score[~snap]
    return rows[snap] + lo, score[snap], out_t


def search_with_tail(searcher: HybridSearcher, con: duckdb.DuckDBPyConnection, user_id: str, vectors: np.ndarray,
                     texts: Sequence[str | None] | None, top_k: int, min_sim: float,
                     kinds: Sequence[str] | None, tail: UserTail) -> list[list[Hit]]:
    """Top ``top_k`` per intent over the user's snapshot memories and ``tail``; a tail memory's
    Hit has row ``-(position + 1)`` in ``tail``. Raises Unserved (not the weighted fusion, or a
    query term longer than the stored terms)."""
    if searcher.fusion.method != "weighted":
        raise Unserved("the index serves a tail user for the weighted fusion only")
    searcher.check_time_scope(texts)
    if any(searcher.asked_slots(t) or searcher.asks_current(t) for t in texts or ()):
        raise Unserved("a question that asks for a slot or the current state runs as compiled over a tail user")
    if searcher.index.formula.lifted and tail.lift_turns is None:
        raise Unserved("a tail made without the conversation lift's turns runs as compiled")
    ix, f, lexicon = searcher.index, searcher.index.formula, searcher.lexicon
    q64 = np.asarray(vectors, dtype=np.float64).reshape(-1, ix.dim)
    lo, hi = ix.block(user_id)
    u = int(np.searchsorted(ix.users, user_id.encode())) if hi > lo else None
    allowed = searcher.allowed_kinds(kinds)
    t_scope = tail.in_scope(kinds, searcher.fusion.episodes_by_default) & (tail.norm > 0)
    said_t = np.array([k == "assistant" for k in tail.kind], dtype=bool)
    mapped = user_id not in ix.meta["ivf"]  # small users' blocks through the memory map
    out: list[list[Hit]] = []
    for i, q in enumerate(q64):
        if top_k <= 0:
            out.append([])
            continue
        qn = q / np.linalg.norm(q)
        text = texts[i] if texts is not None and i < len(texts) else None
        said = searcher.asks_assistant(text)
        fac = ix.factor_said if said else ix.factor
        fac_t = f.factor(strength=tail.strength, is_question=tail.is_question, is_assistant=said_t, to_assistant=said)
        terms = tokenize(text, lexicon, con) if text is not None else []
        stats = _stats(searcher, u, terms, tail)
        l_rows, l_score = np.zeros(0, np.int64), np.zeros(0)
        if u is not None and terms:
            try:
                l_rows, l_score = searcher.postings.scores(u, terms, lexicon.k1, lexicon.b, stats)
            except LookupError as exc:
                raise Unserved(str(exc)) from None
        ls_t = tail.bm25(terms, stats, lexicon.k1, lexicon.b)
        l_rows, l_score, ls_t = _with_context(tail.turn_links(ix, lo, hi), lo, hi, l_rows, l_score, ls_t)
        with np.errstate(invalid="ignore", divide="ignore"):
            cos_t = row_dots(tail.vectors, qn) / tail.norm
        ok_t = t_scope & np.isfinite(cos_t)
        # the snapshot's scoped rows with a vector: float32 screening cosines, exact at the extremes
        rows, c32 = np.zeros(0, np.int64), np.zeros(0)
        if hi > lo and allowed.any():
            approx = searcher.block_cosines(lo, hi, qn, mapped)
            rows = lo + np.flatnonzero(allowed[ix.kind[lo:hi]] & np.isfinite(approx))
            c32 = approx[rows - lo]
        exact = lambda r: ix._cosines(r, qn, mapped)  # noqa: E731
        ends = [cos_t[ok_t]]
        if len(rows):
            ends += [exact(rows[c32 >= c32.max() - TIE_MARGIN]), exact(rows[c32 <= c32.min() + TIE_MARGIN])]
        every = np.concatenate(ends)
        if not len(every):
            out.append([])
            continue
        mn, mx = float(every.min()), float(every.max())
        windows = tail.windows(ix, lo, hi)
        if f.lifted and windows is not None:
            out.append(_lifted(searcher, tail, windows, lo, hi, rows, exact(rows) if len(rows) else np.zeros(0),
                               values_at(l_rows, l_score, rows), fac, cos_t, ok_t, ls_t, fac_t, mn, mx, top_k, min_sim))
            continue
        hits: list[Hit] = []
        if len(rows):
            ls = values_at(l_rows, l_score, rows)
            hits = searcher.rank_screened(rows, c32, exact, ls, mn, mx, fac, top_k, min_sim)
        score_t = f.score(f.relevance(cos=np.clip(cos_t, mn, mx), cos_min=mn, cos_max=mx, bm25=ls_t), fac_t)
        for p in np.flatnonzero(ok_t & (cos_t >= min_sim) & np.isfinite(score_t)).tolist():
            hits.append(Hit(-(p + 1), tail.memory_id[p], tail.kind[p], float(cos_t[p]), float(tail.strength[p]),
                            float(score_t[p]), float(ls_t[p])))
        hits.sort(key=lambda h: (-h.score, h.memory_id.encode()))
        out.append(hits[:top_k])
    return out


def _lifted(searcher: HybridSearcher, tail: UserTail, windows: TurnWindows, lo: int, hi: int, rows: np.ndarray,
            cos: np.ndarray, ls: np.ndarray, fac: np.ndarray, cos_t: np.ndarray, ok_t: np.ndarray, ls_t: np.ndarray,
            fac_t: np.ndarray, mn: float, mx: float, top_k: int, min_sim: float) -> list[Hit]:
    """The conversation lift over the snapshot's and the tail's memories of a user (both scored
    exactly: a tail memory may be near any of the user's memories), in block positions: the
    snapshot's row r is r - lo, tail memory p is (hi - lo) + p."""
    f = searcher.index.formula
    nb = hi - lo
    t_pos = np.flatnonzero(ok_t)
    score = np.concatenate([searcher.score_rows(rows, cos, ls, mn, mx, fac) if len(rows) else np.zeros(0),
                            f.score(f.relevance(cos=np.clip(cos_t[t_pos], mn, mx), cos_min=mn, cos_max=mx,
                                                bm25=ls_t[t_pos]), fac_t[t_pos])])
    at = np.concatenate([rows - lo, nb + t_pos])  # ascending: the block's rows, then the tail's
    c = np.concatenate([cos, cos_t[t_pos]])
    ranked = np.isfinite(c) & (c >= min_sim) & np.isfinite(score)
    final = f.lift(score, best_near(windows, at, at[ranked], score[ranked]))
    lex = np.concatenate([ls, ls_t[t_pos]])
    ix = searcher.index
    hits = []
    for i in np.flatnonzero(ranked).tolist():
        if at[i] < nb:
            r = int(at[i]) + lo
            hits.append(Hit(r, ix.memory_id[r].decode(), ix.kinds[ix.kind[r]], float(c[i]), float(ix.strength[r]),
                            float(final[i]), float(lex[i])))
        else:
            p = int(at[i]) - nb
            hits.append(Hit(-(p + 1), tail.memory_id[p], tail.kind[p], float(c[i]), float(tail.strength[p]),
                            float(final[i]), float(lex[i])))
    hits.sort(key=lambda h: (-h.score, h.memory_id.encode()))
    return hits[:top_k]
