"""Recall has one definition (issue #13 item 1): the score is the macros recall_relevance,
recall_factor and recall_score of macros/recall.sql. The compiled statement renders them as SQL;
the serving index and the PostgreSQL HNSW path evaluate their numpy rendering
(recall_shim/serving/formula.py) and hold no fusion, weight or factor of their own. The numpy
expressions pass an allow-list, and the pruning bounds' contract (monotonicity) holds for every
fusion, with the shipped vars and with extreme ones."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recall_shim.serving.formula import RELEVANCE_INPUTS, FormulaError, RecallFormula, check_expression

from .conftest import ROOT

FUSIONS = ("weighted", "rrf", "vector", "lexical")
EXTREME = {"fusion_vector_weight": 1, "lexical_saturation": 0, "fusion_rrf_k": 0, "strength_weight": 1,
           "question_episode_weight": 2, "assistant_memory_weight": 3, "time_scope_weight": 5,
           "slot_question_weight": 7, "current_question_weight": 4, "conversation_lift_weight": 9}
SETTINGS = {"shipped": {}, "off": {"time_scope_weight": 1, "slot_question_weight": 1, "current_question_weight": 1,
                                   "conversation_lift_weight": 0},
            "extreme": EXTREME,
            "no_strength": {"strength_weight": 0, "fusion_vector_weight": 0, "question_episode_weight": 0,
                            "assistant_memory_weight": 0, "time_scope_weight": 0, "slot_question_weight": 0,
                            "current_question_weight": 0, "conversation_lift_weight": 0}}
# the vars the score is made of: read by the formula macros only
FORMULA_VARS = ("fusion_vector_weight", "lexical_saturation", "fusion_rrf_k", "strength_weight", "question_episode_weight",
                "assistant_memory_weight", "time_scope_weight", "slot_question_weight", "current_question_weight",
                "conversation_lift_weight")


def render(vars: dict, work: Path) -> dict:
    """The formula macros rendered by dbt for every fusion: numpy (as published) and SQL with
    the default input names, and the shipped compiled statement."""
    inline = ("{% set out = {'statement': shim_recall_sql(), 'factor_sql': recall_factor('sql')} %}"
              "{% for f in " + json.dumps(list(FUSIONS)) + " %}"
              "{% do out.update({f: recall_formula_numpy(f), f ~ '_sql': recall_relevance(f, 'sql')}) %}"
              "{% endfor %}{{ tojson(out) }}")
    env = dict(os.environ, AGENT_MEMORY_DB=str(work / "inline.duckdb"), DBT_TARGET_PATH=str(work / "target"),
               DBT_LOG_PATH=str(work / "logs"), DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    dbt = Path(sys.executable).with_name("dbt")
    done = subprocess.run([str(dbt), "compile", "--quiet", "--project-dir", str(ROOT), "--profiles-dir", str(ROOT),
                           "--vars", json.dumps(vars), "--inline", inline],
                          cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    return {name: render(v, tmp_path_factory.mktemp(name)) for name, v in SETTINGS.items()}


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_numpy_and_sql_are_renderings_of_the_same_macros(rendered: dict[str, dict]) -> None:
    for out in rendered.values():
        for f in FUSIONS:
            # the relevance renders the same text in both dialects (coalesce / nullif read alike)
            assert one_line(out[f + "_sql"]) == out[f]["relevance"]
            RecallFormula(out[f]["relevance"], out[f]["factor"], out[f]["score"], out[f]["lift"], 2)  # accepted
            # the lift: on for the fusions with a lexical leg unless its weight is 0
            assert bool(out[f]["lift"]) == (f != "vector" and out is not rendered["off"] and out is not rendered["no_strength"])
        # the factor differs only by the recall_if primitive
        sql = re.sub(r"case when (.+?) then (\(.+?\)|[^ ]+) else ([^ ]+) end", r"where(\1, \2, \3)",
                     one_line(out["factor_sql"]))
        assert sql == out["weighted"]["factor"]
    # the compiled statement (shipped weighted fusion) holds the same relevance and factor, with
    # its column expressions for the inputs
    out = rendered["shipped"]
    stmt = one_line(out["statement"])
    names = {"cos_min": "min(v.similarity) over intent_window", "cos_max": "max(v.similarity) over intent_window",
             "cos": "v.similarity", "bm25": "l.lexical_score"}
    relevance = re.sub(r"\b(cos_min|cos_max|cos|bm25)\b", lambda m: names[m.group(1)], out["weighted"]["relevance"])
    assert relevance + " as relevance" in stmt
    inputs = {"strength": "m.strength", "is_question": "m.is_question", "is_assistant": "(m.kind = 'assistant')",
              "to_assistant": "a.to_assistant",  # the shipped weighted fusion has a lexical leg: `addressed`
              "in_window": "(coalesce(m.created_at >= w.window_start and m.created_at < w.window_end, false)"
                           " or coalesce(m.happened_on >= w.window_start and m.happened_on < w.window_end, false))",
              "slot_asked": "(s.slot is not null)",
              "recency": "r.recency",
              "asks_current": "(a.asks_current and w.intent_id is null)"}
    factor = re.sub(r"\b(strength|is_question|is_assistant|to_assistant|in_window|slot_asked|recency|asks_current)\b",
                    lambda m: inputs[m.group(1)],
                    one_line(out["factor_sql"]))
    assert f"(f.relevance) * ({factor}) as score" in stmt
    # the conversation lift: the same expression over the score and the best score near it
    lift = re.sub(r"\bbest\b", "best_near", re.sub(r"\bscore\b", "score", out["weighted"]["lift"]))
    lift = lift.replace("maximum(", "greatest(")
    assert f"{lift} as final_score" in stmt, lift
    assert "range between 2 preceding and 2 following" in stmt  # conversation_lift_turns


def test_the_formula_is_written_once() -> None:
    """No shim module names a var of the score or computes a factor; in the project, only the
    formula macros read the score's vars (recall_queries publishes them as settings)."""
    for path in (ROOT / "recall_shim").rglob("*.py"):
        text = path.read_text()
        for word in (*FORMULA_VARS, "vector_weight", "saturation", "rrf_k", "question_weight", "assistant_weight"):
            assert word not in text, (path, word)
        assert not re.search(r"1 - \w+ \+ \w+ \* [\w.\[\]]*strength", text), path  # (1 - w + w x strength)
    readers: dict[str, set[str]] = {}
    for path in [*(ROOT / "macros").rglob("*.sql"), *(ROOT / "models").rglob("*.sql")]:
        text = path.read_text()
        for macro, body in re.findall(r"{%-?\s*macro (\w+)\((.*?){%-?\s*endmacro", text, re.S) or [(path.stem, text)]:
            for var in FORMULA_VARS:
                if f"number_var('{var}')" in body:
                    readers.setdefault(var, set()).add(macro)
    assert readers == {"fusion_vector_weight": {"recall_relevance", "recall_queries"},
                       "lexical_saturation": {"recall_relevance", "recall_queries"},
                       "fusion_rrf_k": {"recall_relevance", "recall_queries"},
                       "strength_weight": {"recall_factor", "recall_queries"},
                       "question_episode_weight": {"recall_factor", "recall_queries"},
                       "assistant_memory_weight": {"recall_factor", "recall_queries"},
                       # recall_sql and the published pattern only ask whether the time scope is on (not 1)
                       "time_scope_weight": {"recall_factor", "recall_queries", "recall_sql", "time_scope_pattern"},
                       "slot_question_weight": {"recall_factor", "recall_queries", "recall_sql",
                                                "slot_questions_json"},
                       "current_question_weight": {"recall_factor", "recall_queries", "recall_sql"},
                       # conversation_lift_on only asks whether the lift is on (not 0)
                       "conversation_lift_weight": {"recall_lift", "recall_queries", "conversation_lift_on"}}, readers
    macros = (ROOT / "macros" / "recall.sql").read_text()
    fused = macros[macros.index("\nfused as ("):macros.index("-- the conversation lift (recall_lift)")]  # fusion, score
    assert all(f"{m}(" in fused for m in ("recall_relevance", "recall_factor", "recall_score"))
    for piece in ("nullif", "case when", "number_var", "over intent_window -"):
        assert piece not in fused, piece
    lifted = macros[macros.index("-- the conversation lift (recall_lift)"):macros.index("\nranked as (")]
    assert "recall_lift(" in lifted and "nullif" not in lifted and "number_var" not in lifted


HOSTILE = [
    "__import__('os').system('true')", "cos.__class__", "(1).real", "cos[0]", "cos ** 99", "9 ** 9 ** 9",
    "lambda: cos", "where", "where(where, 1, 2)", "open('/etc/passwd')", "eval('1')", "getattr(cos, 'x')",
    "cos if cos else 1", "cos and bm25", "[cos]", "{cos: 1}", "'cos'", "b'x'", "cos < bm25 < 1", "where(cos, *[1, 2])",
    "where(cos, a=1, b=2)", "strength", "np.where(cos, 1, 2)", "x := 1", "", "   ", "(" * 300 + "cos" + ")" * 300,
    "cos + " * 1000 + "cos", "cos; import os", "True", "None", "cos @ cos", "cos % 2", "cos // 2", "~cos", "not cos",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_or_invalid_expressions_are_refused(text: str) -> None:
    with pytest.raises(FormulaError):
        check_expression(text, RELEVANCE_INPUTS)
    with pytest.raises(FormulaError):
        RecallFormula(text, "strength", "(relevance) * (factor)")


def test_a_snapshot_without_the_rendering_is_not_served() -> None:
    with pytest.raises(FormulaError):
        RecallFormula.of_row({"relevance_numpy": "cos", "factor_numpy": None, "score_numpy": "relevance * factor"})
    with pytest.raises(FormulaError):
        RecallFormula.of_row({})


def test_score_is_monotone_as_the_pruning_bounds_assume(rendered: dict[str, dict]) -> None:
    """The bounds evaluate the formula at the outsiders' best inputs: relevance non-decreasing
    in cos (within [cos_min, cos_max]), bm25 (0 = no match) and -rank (NaN = no lexical match);
    factor >= 0 and non-decreasing in strength on [0, 1]; score non-decreasing in the relevance
    for a factor >= 0, and ``bound`` at least every score of a smaller relevance and a factor in
    range."""
    rng = np.random.default_rng(7)
    n = 4000
    for out in rendered.values():
        for fusion in FUSIONS:
            f = RecallFormula(out[fusion]["relevance"], out[fusion]["factor"], out[fusion]["score"])
            lo, hi = np.sort(rng.uniform(-1, 1, (2, n)), axis=0)
            lo[:50] = hi[:50]  # equal min and max
            cos = rng.uniform(lo, hi)
            up = np.minimum(hi, cos + rng.uniform(0, 0.5, n))
            bm25 = np.where(rng.random(n) < 0.3, 0.0, rng.exponential(3, n))
            more = bm25 + np.where(rng.random(n) < 0.5, 0.0, rng.exponential(3, n))
            vr = rng.integers(1, 500, n).astype(float)
            lr = np.where(rng.random(n) < 0.3, np.nan, rng.integers(1, 500, n).astype(float))
            better_lr = np.where(np.isnan(lr), np.where(rng.random(n) < 0.5, np.nan, rng.integers(1, 500, n)),
                                 np.maximum(1, lr - rng.integers(0, 50, n)))
            base = f.relevance(cos=cos, cos_min=lo, cos_max=hi, bm25=bm25, vector_rank=vr, lexical_rank=lr)
            assert np.isfinite(base).all()
            for changed in (dict(cos=up, bm25=bm25, vector_rank=vr, lexical_rank=lr),
                            dict(cos=cos, bm25=more, vector_rank=vr, lexical_rank=lr),
                            dict(cos=cos, bm25=bm25, vector_rank=np.maximum(1, vr - 7), lexical_rank=lr),
                            dict(cos=cos, bm25=bm25, vector_rank=vr, lexical_rank=better_lr)):
                assert (f.relevance(cos_min=lo, cos_max=hi, **changed) >= base - 1e-12).all(), (fusion, changed.keys())
            s = np.sort(rng.uniform(0, 1, (2, n)), axis=0)
            s[:, :3] = [[0, 0, 1], [0, 1, 1]]
            q, a, to = rng.random(n) < 0.5, rng.random(n) < 0.5, rng.random(n) < 0.5  # per memory, per intent
            f_lo = f.factor(strength=s[0], is_question=q, is_assistant=a, to_assistant=to)
            f_hi = f.factor(strength=s[1], is_question=q, is_assistant=a, to_assistant=to)
            assert (f_lo >= 0).all() and (f_hi >= f_lo - 1e-12).all()
            assert (f.score(base + rng.uniform(0, 1, n), f_lo) >= f.score(base, f_lo) - 1e-12).all()
            # the corners (strength 0 / 1 x each flag) hold the factor's extremes (PgAnn's bound)
            ends = f.factor(strength=np.repeat([0.0, 1.0], 8), is_question=np.tile(np.repeat([False, True], 4), 2),
                            is_assistant=np.tile(np.repeat([False, True], 2), 4), to_assistant=np.tile([False, True], 8))
            r_max = float(base.max())
            bound = f.bound(r_max, float(ends.min()), float(ends.max()))
            assert (f.score(base, f_hi) <= bound + 1e-12).all()
            # the conversation lift: non-decreasing in the score and in the best score near it
            # (best >= score: a memory is near itself); 0 and 0 give 0
            lf = RecallFormula(out[fusion]["relevance"], out[fusion]["factor"], out[fusion]["score"],
                               out[fusion]["lift"], 2)
            sc = rng.exponential(1, n)
            sc[:5] = 0
            best = sc + np.where(rng.random(n) < 0.3, 0.0, rng.exponential(1, n))
            final = lf.lift(sc, best)
            assert np.isfinite(final).all() and (final >= sc - 1e-12).all()
            assert (lf.lift(sc + rng.uniform(0, 1, n), best) >= final - 1e-12).all()
            assert (lf.lift(sc, best + rng.uniform(0, 1, n)) >= final - 1e-12).all()
            assert lf.lift(np.zeros(1), np.zeros(1)).tolist() == [0.0]


def test_the_factor_weighs_the_assistant_or_everyone_else(rendered: dict[str, dict]) -> None:
    """recall_factor's assistant weighting: an ordinary question (to_assistant false) weighs the
    'assistant' memories, a question about what the assistant said (to_assistant true, per intent)
    weighs every other memory; the var's value comes with the rendering."""
    f = RecallFormula(*(rendered["extreme"]["weighted"][c] for c in ("relevance", "factor", "score")))
    one = np.array([1.0, 1.0])
    mine = np.array([True, False])  # is_assistant
    plain = f.factor(strength=one, is_question=np.array([False, False]), is_assistant=mine, to_assistant=False)
    asked = f.factor(strength=one, is_question=np.array([False, False]), is_assistant=mine, to_assistant=True)
    assert plain.tolist() == [3.0, 1.0] and asked.tolist() == [1.0, 3.0]
    both = f.factor(strength=one, is_question=np.array([False, False]), is_assistant=mine,
                    to_assistant=np.array([False, True]))  # per-intent input broadcast against memories
    assert both.tolist() == [3.0, 3.0]
    # a memory in the time window the question names carries var time_scope_weight (5 here); the
    # serving paths never pass in_window: they leave such questions to the compiled statement
    timed = f.factor(strength=one, is_question=np.array([False, False]), is_assistant=np.array([False, False]),
                     to_assistant=False, in_window=np.array([True, False]))
    assert timed.tolist() == [5.0, 1.0]
    assert "where(in_window, 1.5, 1)" in rendered["shipped"]["weighted"]["factor"]  # shipped 1.5; 1 = off
    assert "in_window" not in rendered["off"]["weighted"]["factor"]  # time_scope_weight 1: the off switch
    # a memory whose slot the question asks for carries var slot_question_weight (7 here), likewise
    # left to the compiled statement by the serving paths
    asked = f.factor(strength=one, is_question=np.array([False, False]), is_assistant=np.array([False, False]),
                     to_assistant=False, slot_asked=np.array([False, True]))
    assert asked.tolist() == [1.0, 7.0]
    assert "where(slot_asked, 2, 1)" in rendered["shipped"]["weighted"]["factor"]  # shipped 2; 1 = off
    assert "slot_asked" not in rendered["off"]["weighted"]["factor"]
    # a question about the current state (asks_current, per intent) weighs a memory by
    # 1 + (c - 1) x its recency: the newest c (4 here), the oldest 1; not read otherwise
    now = f.factor(strength=np.ones(3), is_question=np.zeros(3, bool), is_assistant=np.zeros(3, bool),
                   to_assistant=False, recency=np.array([0.0, 0.5, 1.0]), asks_current=True)
    assert now.tolist() == [1.0, 2.5, 4.0]
    assert f.factor(strength=np.ones(3), is_question=np.zeros(3, bool), is_assistant=np.zeros(3, bool),
                    to_assistant=False, recency=np.array([0.0, 0.5, 1.0]), asks_current=False).tolist() == [1.0] * 3
    assert "asks_current" not in rendered["off"]["weighted"]["factor"]


def test_the_lift_is_the_harmonic_mean_of_a_score_and_the_best_near_it(rendered: dict[str, dict]) -> None:
    """recall_lift: score + weight x 2 x score x best / (score + best) (9 here): a memory alone in
    its neighbourhood (best = score) scores 1 + weight times its score, one beside a far better
    match at most 1 + 2 x weight times; a memory of score 0 gains nothing, whatever is near it."""
    out = rendered["extreme"]["weighted"]
    f = RecallFormula(out["relevance"], out["factor"], out["score"], out["lift"], 2)
    assert f.lifted and f.lift_turns == 2
    got = f.lift(np.array([0.5, 1.0, 0.0, 1.0]), np.array([0.5, 3.0, 5.0, 1e12]))
    assert got == pytest.approx([5.0, 14.5, 0.0, 19.0])
    off = rendered["off"]["weighted"]
    plain = RecallFormula(off["relevance"], off["factor"], off["score"], off["lift"], 2)
    assert not plain.lifted and plain.lift(np.array([0.5]), np.array([2.0])).tolist() == [0.5]
    with pytest.raises(FormulaError):  # a lift without its turns
        RecallFormula.of_row({"relevance_numpy": "cos", "factor_numpy": "strength", "score_numpy": "relevance * factor",
                              "lift_numpy": out["lift"], "conversation_lift_turns": None})
