"""The HNSW path of PgMemoryStore (recall_shim/targets/postgres/ann.py) returns the exact statement's top-k:
a few thousand synthetic memories (benchmarks/recall_speed/synth.py) in a real PostgreSQL +
pgvector, the real compiled statement (dbt run --target postgres, fusion vector)."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from benchmarks.recall_speed import pg as bench_pg
from benchmarks.recall_speed.synth import BIG_USER, SynthSpec, compiled_recall_queries, queries, write_snapshot
from recall_shim import LocalPostgres, PgMemoryStore

from .conftest import start_postgres


@pytest.fixture(scope="module")
def ann_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    work = tmp_path_factory.mktemp("pg_ann")
    server = LocalPostgres(work / "data", schema=bench_pg.SCHEMA)
    conn = start_postgres(server)
    try:
        spec = SynthSpec(4000, 384)
        snap = write_snapshot(spec, work / "serving", compiled_recall_queries(384, work))
        bench_pg._dbt_compiled(conn, 384, work, {"recall_index_min_rows": 1000, "recall_index_candidates": 16,
                                                   "recall_index_ef_search": 200})
        bench_pg._load(conn, spec, snap)
        yield PgMemoryStore(conn, work_dir=work / "pg-work"), queries(spec, 40)
    finally:
        server.stop()


def test_hnsw_path_matches_the_exact_statement(ann_store: tuple[Any, Any]) -> None:
    store, qs = ann_store
    compared = 0
    for i, q in enumerate(qs):
        kinds = [["fact"], None][i % 2]
        for k, min_sim in ((10, 0.5), (3, 0.0)):
            fast = store.recall(q, user_id=BIG_USER, top_k=k, min_sim=min_sim, kinds=kinds, record_access=False)
            exact = _exact(store, q, k, min_sim, kinds)  # the compiled statement (exact)
            assert [m.memory_id for m in fast] == [m.memory_id for m in exact]
            for a, b in zip(fast, exact):
                assert a.score == pytest.approx(b.score, abs=1e-6) and a.similarity == pytest.approx(b.similarity, abs=1e-6)
                assert (a.said_at, a.happened_on, a.happened_grain) == (b.said_at, b.happened_on, b.happened_grain)
            compared += 1
    assert compared == 80 and store._ann.used + store._ann.fallbacks == 80 and store._ann.used > 60


def test_small_users_are_scanned_exactly_through_the_user_id_index(ann_store: tuple[Any, Any]) -> None:
    """Below recall_index_min_rows: the exact scan of the user's rows (ann.py), the statement's
    answer, read through the user_id btree without touching another user's rows."""
    store, qs = ann_store
    s = store.conn.schema
    with store.conn.connect() as con:
        small = [r[0] for r in con.execute(f"select user_id from {s}.long_term_memory where user_id <> %s"
                                           " group by user_id order by count(*) desc, user_id limit 3",
                                           [BIG_USER]).fetchall()]
    assert len(small) == 3
    exact_before = store._ann.exact
    compared = 0
    for user in small:
        for i, q in enumerate(qs[:6]):
            kinds = [None, ["fact"]][i % 2]
            fast = store.recall(q, user_id=user, top_k=3, min_sim=0.0, kinds=kinds, record_access=False)
            exact = _exact(store, q, 3, 0.0, kinds, user=user)
            assert [m.memory_id for m in fast] == [m.memory_id for m in exact]
            for a, b in zip(fast, exact):
                assert a.score == pytest.approx(b.score, abs=1e-6)
            compared += 1
    assert store._ann.exact - exact_before == compared == 18
    # the plans: the exact scan and the compiled statement read the user's rows through the
    # user_id index; neither scans the table (other users' rows)
    vec = "[" + ",".join(repr(float(x)) for x in qs[0]) + "]"
    with store.conn.connect() as con, con.transaction():
        con.execute("set local enable_indexscan = off")  # as ann.py does for a small user
        scan = _plan(con, f"select memory_id from {s}.long_term_memory where user_id = %s and valid_to is null"
                          f" order by embedding::vector(384) <=> %s::vector(384) limit 16", [small[0], vec])
    assert "Bitmap Index Scan on long_term_memory_user_id" in scan and "Seq Scan" not in scan, scan
    from recall_shim.targets.postgres.store import _text_array_literal, _vector_literal

    sql = store._reader.settings.sql_text
    with store.conn.connect() as con:
        con.execute(f"prepare recall_stmt as {sql}")
        statement = _plan(con, "execute recall_stmt(%s, %s, 3, 0.0, null, %s, null, null)",
                          [small[0], _vector_literal([list(map(float, qs[0]))]), _text_array_literal([None])])
    assert "long_term_memory_user_id" in statement and "Seq Scan on long_term_memory" not in statement, statement


def _plan(con: Any, sql: str, params: list[Any]) -> str:
    """EXPLAIN with the values inlined (a client-side cursor): the plan for these values."""
    import psycopg

    with psycopg.ClientCursor(con) as cur:
        return "\n".join(r[0] for r in cur.execute("explain " + sql, params).fetchall())


def _exact(store: Any, q: Any, k: int, min_sim: float, kinds: Any, user: str = BIG_USER) -> Any:
    s = store._reader.settings
    from recall_shim.targets.postgres.store import _text_array_literal, _vector_literal

    rows = store._execute(s.sql_text, [user, _vector_literal([list(map(float, q))]), k, min_sim,
                                       kinds, _text_array_literal([None]), None, None])
    from recall_shim import RecalledMemory

    return [RecalledMemory.of_row(r) for r in rows]


def test_the_hnsw_search_list_is_at_least_recall_index_ef_search(ann_store: tuple[Any, Any]) -> None:
    """The HNSW path asks for the c nearest rows (LIMIT c) with hnsw.ef_search = max(c,
    recall_index_ef_search): a longer search list finds more of the true nearest (1M memories:
    docs/scaling_out.md). Observed on the real connection, statement by statement."""
    store, qs = ann_store
    s = store.conn.schema
    with store.conn.connect() as con:
        assert con.execute(f"select ef_search, candidates from {s}.recall_index_settings").fetchone() == (200, 16)

    class Recording:
        def __init__(self, con: Any) -> None:
            self.con, self.ef, self.limits = con, [], []

        def execute(self, sql: str, params: Any = None) -> Any:
            if "hnsw.ef_search" in sql:
                self.ef.append(int(sql.rsplit("=", 1)[1]))
            elif "order by embedding" in sql:
                self.limits.append(params[-1])
            return self.con.execute(sql, params)

    store.recall(qs[0], user_id=BIG_USER, top_k=10, min_sim=0.5, record_access=False)  # settings and counts read
    with store.conn.connect() as con, con.transaction():
        rec = Recording(con)
        rows = store._ann.recall(rec, user_id=BIG_USER, vectors=[qs[0]], top_k=10, min_sim=0.5, kinds=None,
                                 episodes_by_default=True, dim=384, formula=store._reader.formula)
    assert rows and rec.limits and rec.limits[0] == 80  # at least 8 x top_k candidates
    assert rec.ef == [max(200, limit) for limit in rec.limits]
