"""Metrics of the recall-quality sets, on ranked result lists (dicts with source_message_ids).

  any@k       share of questions with at least one hit in the top k
  frac@k      share of a question's evidence messages covered by the top k, averaged
  ndcg@10     binary-relevance NDCG over evidence messages: a result gains 1 when it covers an
              evidence message no earlier result covered, else 0 (a second memory derived from
              the same message is no new hit); ideal: min(|evidence|, 10) gains first
  mrr         mean reciprocal rank of the first hit
  top-n       (probes) a memory derived from an `expect` message is among the first n
  outdated above current
              (probes with `outdated`) a memory derived from an outdated message and from no
              expect message ranks above the first memory derived from an expect message (or is
              recalled while none derived from an expect message is)
A result hits when its source_message_ids include one of the question's evidence ids.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable, Sequence

Result = dict[str, Any]


def _sources(r: Result) -> set[str]:
    return set(r["source_message_ids"])


def score_question(evidence: set[str], results: Sequence[Result], ks: Iterable[int]) -> dict[str, float]:
    if not evidence:
        raise ValueError("a question needs at least one evidence message id")
    hits = [bool(evidence & _sources(r)) for r in results]
    m: dict[str, float] = {}
    for k in ks:
        m[f"any@{k}"] = float(any(hits[:k]))
        covered: set[str] = set()
        for r in results[:k]:
            covered |= evidence & _sources(r)
        m[f"frac@{k}"] = len(covered) / len(evidence)
    # binary gain per evidence message: a result gains 1 when it covers an evidence id no earlier
    # result covered (a memory derived from several evidence ids still gains 1; a further memory
    # from an already-covered message gains 0), so at most |evidence| results gain and DCG never
    # exceeds the ideal list's min(|evidence|, 10) gains at the top
    dcg = 0.0
    seen: set[str] = set()
    for i, r in enumerate(results[:10]):
        new = (evidence & _sources(r)) - seen
        if new:
            dcg += 1 / math.log2(i + 2)
            seen |= new
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(evidence), 10)))
    m["ndcg@10"] = dcg / idcg
    m["mrr"] = next((1 / (i + 1) for i, h in enumerate(hits) if h), 0.0)
    return m


def first_rank(ids: set[str], results: Sequence[Result], exclude: set[str] = frozenset()) -> int | None:  # type: ignore[assignment]
    """0-based rank of the first result derived from one of ids and from none of exclude."""
    for i, r in enumerate(results):
        src = _sources(r)
        if src & ids and not src & exclude:
            return i
    return None


def top_n(expect: set[str], results: Sequence[Result], n: int) -> bool:
    rank = first_rank(expect, results)
    return rank is not None and rank < n


def outdated_above_current(expect: set[str], outdated: set[str], results: Sequence[Result]) -> bool:
    """True when a memory derived only from outdated messages outranks every current one."""
    if not outdated:
        return False
    old = first_rank(outdated, results, exclude=expect)
    if old is None:
        return False
    cur = first_rank(expect, results)
    return cur is None or old < cur


def mean_by_group(rows: Iterable[tuple[Sequence[str], dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Average metric dicts per group; each row names the groups it counts in (e.g. its category
    and "overall"). A metric missing from a row (not applicable) is left out of that mean;
    "n" is the number of rows of the group, "n:<metric>" the rows a metric was averaged over."""
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    n: dict[str, int] = defaultdict(int)
    for groups, m in rows:
        for g in groups:
            n[g] += 1
            for name, v in m.items():
                sums[g][name] += v
                counts[g][name] += 1
    out: dict[str, dict[str, float]] = {}
    for g in n:
        out[g] = {name: sums[g][name] / counts[g][name] for name in sums[g]}
        out[g] |= {f"n:{name}": float(c) for name, c in counts[g].items()}
        out[g]["n"] = float(n[g])
    return out


LOWER_IS_BETTER = {"outdated above current"}


def fmt(v: float) -> str:
    return "n/a" if v != v else f"{v:.3f}"


def table(title: str, columns: list[str], scores: dict[str, dict[str, dict[str, float]]],
          groups: list[str], metrics: list[str], group_label: str = "category") -> str:
    """Markdown table: one row per (group, metric), one column per setting; the unique best value
    of a row is bold (the lowest for LOWER_IS_BETTER metrics)."""
    lines = [f"### {title}", "", f"| {group_label} | metric | " + " | ".join(columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for g in groups:
        if g not in scores[columns[0]]:
            continue
        n = int(scores[columns[0]][g]["n"])
        for metric in metrics:
            if metric not in scores[columns[0]][g]:
                continue
            vals = [scores[c][g][metric] for c in columns]
            best = min(vals) if metric in LOWER_IS_BETTER else max(vals)
            cells = [f"**{fmt(v)}**" if len(vals) > 1 and v == best and vals.count(best) == 1 else fmt(v) for v in vals]
            sub = scores[columns[0]][g].get(f"n:{metric}", n)
            label = f"{metric} (n={int(sub)})" if int(sub) != n else metric
            lines.append(f"| {g} (n={n}) | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
