"""The recall score as the build rendered it for numpy: the one definition is macros/recall.sql
(``recall_relevance``, ``recall_factor``, ``recall_score``, ``recall_lift``); the build publishes
their numpy rendering, with its var values, in ``recall_queries`` (columns relevance_numpy,
factor_numpy, score_numpy, lift_numpy: '' when the conversation lift is off). This module only
checks and evaluates those expressions: it holds no fusion, weight or factor of its own.

An expression is accepted only after an allow-list check of its syntax tree: numbers, the input
names, ``nan``, + - * / (no power), unary minus, one comparison, and calls of ``where``, ``isnan``,
``coalesce``, ``nullif`` and ``maximum`` with positional arguments. Anything else (attributes, subscripts,
strings, keywords, other names or calls, lambdas, ...) is refused with FormulaError, and so is
a text over MAX_CHARS. Compiled once per snapshot; evaluated on candidate arrays with builtins
removed.

Dialect primitives (macros/recall.sql): NaN stands for NULL; coalesce(x, d) is d where x is NaN;
nullif(x, 0) is NaN where x is 0; where(c, a, b) is recall_if.

The pruning bounds of the serving paths evaluate these same expressions at the bound's inputs.
That relies on the contract stated with the macros (checked by tests_py/test_recall_definition.py):
the relevance is non-decreasing in cos, bm25 and -rank, the factor is at least 0 and
non-decreasing in strength (its other inputs are flags, so over a set of memories its extremes are
taken over the memories themselves, or over the corners strength 0 / 1 x each flag), and the score is non-decreasing in the relevance for a factor >= 0
and monotone in the factor (so its maximum over a factor range is at one of the ends).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from recall_shim.serving.snapshot import connect_snapshot

__all__ = ["FormulaError", "RecallFormula", "near_top", "check_expression", "RELEVANCE_INPUTS", "FACTOR_INPUTS",
           "SCORE_INPUTS", "LIFT_INPUTS"]

MAX_CHARS = 4000
RELEVANCE_INPUTS = frozenset({"cos", "cos_min", "cos_max", "bm25", "vector_rank", "lexical_rank"})
# recall_factor's inputs: per memory strength, is_question, is_assistant (kind 'assistant'); per
# intent to_assistant (the query asks what the assistant said); per memory and intent in_window (the
# question names a time the memory falls in: false on every path here, since they serve only
# questions without one, hybrid.py check_time_scope), slot_asked (the question asks for the
# memory's slot) and recency (where the memory was said in the span of the user's scoped memories,
# read when the intent's asks_current: the question asks for the current state): serving/asked.py.
# A new input joins here and is passed by
# SnapshotIndex and PgAnn; until then an expression naming it is refused and the statement answers
FACTOR_INPUTS = frozenset({"strength", "is_question", "is_assistant", "to_assistant", "in_window", "slot_asked",
                           "recency", "asks_current"})
SCORE_INPUTS = frozenset({"relevance", "factor"})
# recall_lift's inputs: a memory's score and the best score near it in its conversation (itself included)
LIFT_INPUTS = frozenset({"score", "best"})


def coalesce(x: Any, default: Any) -> Any:
    """SQL coalesce with NaN as NULL."""
    return np.where(np.isnan(x), default, x)


def nullif(x: Any, value: Any) -> Any:
    """SQL nullif with NaN as NULL."""
    return np.where(x == value, np.nan, x)


FUNCTIONS: dict[str, Callable[..., Any]] = {"where": np.where, "isnan": np.isnan, "coalesce": coalesce,
                                            "nullif": nullif, "maximum": np.maximum}
CONSTANTS: dict[str, float] = {"nan": float("nan")}
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub, ast.UAdd, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt,
              ast.GtE, ast.Load)


class FormulaError(ValueError):
    """A published recall expression that is not a plain arithmetic expression of its inputs."""


def check_expression(text: str, inputs: frozenset[str]) -> ast.Expression:
    """The parsed expression if it passes the allow-list, else FormulaError."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_CHARS:
        raise FormulaError("a recall expression must be a non-empty string of at most %d characters" % MAX_CHARS)
    try:
        tree = ast.parse(" ".join(text.split()), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, *_OPERATORS)):
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            continue
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            continue
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            continue
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            continue
        if isinstance(node, ast.Name) and (node.id in inputs or node.id in FUNCTIONS or node.id in CONSTANTS):
            continue
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
                and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)):
            continue
        raise FormulaError(f"not allowed in a recall expression: {ast.dump(node)[:80]}")
    callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):  # a function name only as a callee, never as a value
        if isinstance(node, ast.Name) and node.id in FUNCTIONS and id(node) not in callees:
            raise FormulaError(f"{node.id} must be called")
    return tree


class _Compiled:
    """One checked expression, compiled once; called with its inputs as keyword arrays."""

    def __init__(self, text: str, inputs: frozenset[str]) -> None:
        self.text = " ".join(text.split())
        tree = check_expression(text, inputs)
        self.code = compile(tree, "<recall expression>", "eval")
        self.names = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)) & inputs
        self.globals: dict[str, Any] = {"__builtins__": {}, **FUNCTIONS, **CONSTANTS}

    def __call__(self, values: Mapping[str, Any]) -> Any:
        with np.errstate(all="ignore"):
            return eval(self.code, self.globals, dict(values))  # noqa: S307 - allow-listed above


class RecallFormula:
    """The snapshot's relevance, factor and score expressions (numpy rendering of the macros),
    checked and compiled once."""

    def __init__(self, relevance: str, factor: str, score: str, lift: str = "", lift_turns: int = 0) -> None:
        self._relevance = _Compiled(relevance, RELEVANCE_INPUTS)
        self._factor = _Compiled(factor, FACTOR_INPUTS)
        self._score = _Compiled(score, SCORE_INPUTS)
        # the conversation lift (None: off); lift_turns: how many turns around a memory count as near
        self._lift = _Compiled(lift, LIFT_INPUTS) if lift.strip() else None
        self.lift_turns = int(lift_turns)

    @property
    def texts(self) -> tuple[str, str, str]:
        return self._relevance.text, self._factor.text, self._score.text

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> "RecallFormula":
        """From a recall_queries row; FormulaError if it lacks the expressions or one is refused."""
        texts = [row.get(c) for c in ("relevance_numpy", "factor_numpy", "score_numpy")]
        if any(not isinstance(t, str) for t in texts):
            raise FormulaError("recall_queries lacks the numpy rendering of the recall score: rebuild the store")
        lift = row.get("lift_numpy") or ""  # a snapshot published before the lift has none
        turns = row.get("conversation_lift_turns")
        if not isinstance(lift, str) or (lift.strip() and not isinstance(turns, int)):
            raise FormulaError("recall_queries has a conversation lift without its turns: rebuild the store")
        return cls(*texts, lift=lift, lift_turns=int(turns or 0))

    @property
    def lifted(self) -> bool:
        """Is the conversation lift on (macros/recall.sql recall_lift)?"""
        return self._lift is not None

    def lift(self, score: Any, best: Any) -> np.ndarray:
        """The final score of memories of ``score`` whose best near score is ``best`` (the score
        itself when the lift is off). Non-decreasing in both (tests_py/test_recall_definition.py)."""
        if self._lift is None:
            return np.asarray(score, dtype=np.float64)
        return np.asarray(self._lift({"score": score, "best": best}), dtype=np.float64)

    @classmethod
    def of_snapshot(cls, snapshot: Path) -> "RecallFormula":
        """The score published in the snapshot file's recall_queries."""
        con = connect_snapshot(snapshot)
        try:
            rows = con.sql("select * from recall_queries where query_name = 'recall'").to_arrow_table().to_pylist()
        finally:
            con.close()
        return cls.of_row(rows[0] if rows else {})

    @property
    def uses(self) -> frozenset[str]:
        """The relevance's inputs (a fusion without ``cos`` needs no vector leg, and so on)."""
        return self._relevance.names

    def relevance(self, *, cos: Any = 0.0, cos_min: Any = 0.0, cos_max: Any = 0.0, bm25: Any = 0.0,
                  vector_rank: Any = np.nan, lexical_rank: Any = np.nan) -> np.ndarray:
        """Relevance of candidates: bm25 0 or NaN and lexical_rank NaN mean no lexical match."""
        return np.asarray(self._relevance({"cos": cos, "cos_min": cos_min, "cos_max": cos_max, "bm25": bm25,
                                           "vector_rank": vector_rank, "lexical_rank": lexical_rank}), dtype=np.float64)

    def factor(self, **inputs: Any) -> np.ndarray:
        """The per-memory multiplier of arrays ``strength``, ``is_question`` and ``is_assistant`` and
        the intent's ``to_assistant`` (a bool, or an array broadcast against them); ``in_window``
        and ``slot_asked`` are false unless given (no time named, no slot asked for), so is
        ``asks_current`` (then ``recency`` is not read)."""
        return np.asarray(self._factor({"in_window": False, "slot_asked": False, "asks_current": False, "recency": 1.0,
                                        **inputs}), dtype=np.float64)

    def score(self, relevance: Any, factor: Any) -> np.ndarray:
        return np.asarray(self._score({"relevance": relevance, "factor": factor}), dtype=np.float64)

    def bound(self, relevance: float, f_min: float, f_max: float) -> float:
        """The largest score a memory of at most ``relevance`` and a factor in [f_min, f_max] can
        reach (the score is monotone in the factor; NaN factors are ignored)."""
        ends = self.score(np.float64(relevance), np.array([f_min, f_max], dtype=np.float64))
        return float(np.nanmax(ends))


def near_top(lower: np.ndarray, upper: np.ndarray, top_k: int) -> np.ndarray:
    """Positions whose upper score bound reaches the k-th largest lower bound (non-finite scores
    never do): nothing outside can enter the top k."""
    finite = np.flatnonzero(np.isfinite(lower) & np.isfinite(upper))
    if len(finite) <= top_k:
        return finite
    low = lower[finite]
    kth = np.partition(low, len(low) - top_k)[len(low) - top_k]
    return finite[upper[finite] >= kth]
