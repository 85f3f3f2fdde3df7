"""The template-generated development set (make_devset.py writes data/): the regression set.

Each user's conversations are shifted in time so that every user's last message falls on the same
day (order and gaps within a user are kept). Otherwise most users' memories have long decayed to
the floor by AS_OF and the decay A/B would compare constants: the agent is assumed to ask right
after each user's latest session.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from . import metrics, runner

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
AS_OF = "2026-09-06 00:00:00"  # the day after the development set's last message
SINGLE_LEGS = ["bm25", "vector", "bm25, no strength", "vector, no strength"]
DECAY_SETTINGS: list[tuple[str, dict[str, Any]]] = [
    ("shipped", {}),
    ("strength_weight 1 (reference)", {"strength_weight": 1.0}),
    ("decay 0.99/day", {"decay_rate_per_day": 0.99, "strength_weight": 1.0}),
    ("floor 0.6", {"strength_floor": 0.6, "strength_weight": 1.0}),
    ("strength ignored", {"strength_weight": 0.0}),
]
CATEGORIES = ["single", "multi_hop", "temporal"]
_FMT = "%Y-%m-%d %H:%M:%S"


def aligned_log(dest: Path) -> Path:
    """Write the development log with each user's timeline shifted to end on the set's last day."""
    src = DATA / "session_log.jsonl"
    if not src.exists():
        raise SystemExit(f"{src} is missing: run `python benchmarks/recall_quality/make_devset.py` first")
    rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
    end = max(datetime.strptime(r["ts"], _FMT) for r in rows)
    last: dict[str, datetime] = {}
    for r in rows:
        t = datetime.strptime(r["ts"], _FMT)
        last[r["user_id"]] = max(last.get(r["user_id"], t), t)
    for r in rows:
        r["ts"] = (datetime.strptime(r["ts"], _FMT) + (end - last[r["user_id"]])).strftime(_FMT)
    return runner.write_jsonl(dest, rows)


def load_questions() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def run(out: Path, ks: list[int], base_vars: dict[str, Any], decay_ab: bool,
        tries: list[tuple[str, dict[str, Any]]] | None = None, reuse: bool = False) -> tuple[str, dict[str, Any]]:
    """Ingest the development set (unless ``reuse`` finds the store built), measure every mode, each
    candidate setting of ``tries`` (and the decay A/B); returns (report, results)."""
    db = out / "devset.duckdb"
    questions = load_questions()
    print(f"development set: {len(questions)} questions; store {db}", flush=True)
    if not runner.existing_store(db, reuse):
        print(runner.cli(db, "ingest", str(aligned_log(out / "session_log.aligned.jsonl"))).strip(), flush=True)
    top_k = max(max(ks), 10)
    requests = [{"id": q["question_id"], "user_id": q["user_id"], "query": q["query"], "top_k": top_k, "min_sim": -1}
                for q in questions]
    metric_names = [f"any@{k}" for k in ks] + [f"frac@{k}" for k in ks] + ["ndcg@10", "mrr"]

    def score(res: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
        return metrics.mean_by_group(((q["category"], "overall"),
                                      metrics.score_question(set(q["evidence"]), res[q["question_id"]], ks))
                                     for q in questions)

    def measure(settings: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, float]]]:
        raw = runner.measure_modes(db, AS_OF, settings, base_vars, requests)
        scores = {label: score(raw[label]) for label, _ in settings}
        for label, _ in settings:
            o = scores[label]["overall"]
            print(f"  {label}: any@10 {o.get('any@10', float('nan')):.3f}  frac@10 {o.get('frac@10', float('nan')):.3f}",
                  flush=True)
        return scores

    settings = runner.MODES + list(tries or [])
    modes = measure(settings)
    report = [metrics.table("Development set: BM25 only vs vector only vs shipped hybrid (same store, same run)",
                            [m for m, _ in settings], modes, CATEGORIES + ["overall"], metric_names)]
    results: dict[str, Any] = {"as_of": AS_OF, "modes": modes}
    if decay_ab:
        decay = measure(DECAY_SETTINGS)
        report.append(metrics.table("Development set: decay A/B on the shipped hybrid", [d for d, _ in DECAY_SETTINGS],
                                    decay, CATEGORIES + ["overall"],
                                    ["any@1", "any@5", "frac@10", "ndcg@10", "mrr"] if 5 in ks else metric_names))
        results["decay"] = decay
    hybrid = modes[runner.SHIPPED]["overall"]
    for metric in ("any@10", "frac@10"):
        if metric in hybrid:
            best_leg = max(SINGLE_LEGS, key=lambda m: modes[m]["overall"][metric])
            verdict = "beats" if hybrid[metric] > modes[best_leg]["overall"][metric] else "does NOT beat"
            report.append(f"shipped hybrid {metric} {hybrid[metric]:.3f} {verdict} the best single leg "
                          f"({best_leg}: {modes[best_leg]['overall'][metric]:.3f})")
    return "\n\n".join(report), results
