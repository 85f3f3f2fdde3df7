"""The report's similarity data, for choosing ``recall_min_sim`` on any store.

Each user's queries are the standing recall intents of ``seeds/recall_intents.csv`` when the
user has some, else a deterministic sample of that user's own messages (the questions and
statements agents see), embedded with the store's query form. Every query is paired with each
current memory of its user, except memories made from that very message (an episode is its
message: cosine 1 says nothing about the threshold)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import duckdb
import numpy as np

from recall_shim.common.embedding import embed_texts
from recall_shim.build.warehouse import rows, tables

SAMPLE_MESSAGES = 60       # messages embedded for users without standing intents (whole store)
SAMPLE_PER_USER = 6


@dataclass
class Similarities:
    pairs: list[tuple[float, bool]]   # (cosine, is the best match of its query)
    intents: int                      # queries that were standing intents
    messages: int                     # queries sampled from the users' messages


def _intent_pairs(con: duckdb.DuckDBPyConnection) -> tuple[list[tuple[float, bool]], int, set[str]]:
    found = rows(con, """
        with pairs as (
            select i.intent_id, array_cosine_similarity(m.embedding, i.embedding) as similarity
            from int_recall_intent_embeddings as i
            inner join long_term_memory as m on m.user_id = i.user_id and m.valid_to is null
        )
        select similarity, row_number() over (partition by intent_id order by similarity desc) = 1 as best
        from pairs where similarity is not null and not isnan(similarity)""")
    users = {r[0] for r in con.execute("select distinct user_id from int_recall_intent_embeddings").fetchall()}
    n = con.execute("select count(*) from int_recall_intent_embeddings").fetchone()[0]
    return [(float(r["similarity"]), bool(r["best"])) for r in found], int(n), users


def collect_similarities(con: duckdb.DuckDBPyConnection) -> Similarities:
    have = tables(con)
    pairs: list[tuple[float, bool]] = []
    n_intents, covered = 0, set()
    if "int_recall_intent_embeddings" in have:
        pairs, n_intents, covered = _intent_pairs(con)
    if not {"session_messages", "recall_queries"} <= have:
        return Similarities(pairs, n_intents, 0)
    settings = rows(con, "select embedding_model, embedding_query_form from recall_queries limit 1")
    if not settings:
        return Similarities(pairs, n_intents, 0)
    sample = rows(con, """
        with candidates as (
            select m.user_id, m.message_id, m.content,
                   row_number() over (partition by m.user_id order by hash(m.message_id)) as n
            from session_messages as m
            where m.role = 'user' and length(m.content) between 8 and 500
                and m.user_id in (select t.user_id from long_term_memory as t where t.valid_to is null)
                and m.user_id not in (select unnest(?::varchar[]))
        )
        select user_id, message_id, content from candidates where n <= ?
        order by hash(message_id) limit ?""", [sorted(covered), SAMPLE_PER_USER, SAMPLE_MESSAGES])
    if not sample:
        return Similarities(pairs, n_intents, 0)
    vectors = embed_texts(settings[0]["embedding_model"], settings[0]["embedding_query_form"],
                          [r["content"] for r in sample])
    users = sorted({r["user_id"] for r in sample})
    memories: dict[str, list[tuple[np.ndarray, set[str]]]] = defaultdict(list)
    for user_id, emb, sources in con.execute("""
            select user_id, embedding, source_message_ids from long_term_memory
            where valid_to is null and embedding is not null and user_id in (select unnest(?::varchar[]))""",
                                             [users]).fetchall():
        memories[user_id].append((np.asarray(emb, dtype=np.float32), set(sources or [])))
    for r, q in zip(sample, vectors):
        sims = [float(np.dot(q, e) / (np.linalg.norm(q) * np.linalg.norm(e) or 1.0))
                for e, sources in memories[r["user_id"]] if r["message_id"] not in sources]
        if sims:
            best = int(np.argmax(sims))
            pairs += [(s, i == best) for i, s in enumerate(sims)]
    return Similarities(pairs, n_intents, len(sample))
