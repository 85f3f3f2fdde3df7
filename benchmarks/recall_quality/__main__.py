"""Recall quality harness: BM25-only vs vector-only vs the shipped hybrid, side by side.

    python -m benchmarks.recall_quality [--out DIR] [--k 1 5 10] [--no-decay-ab]

Drives the public interface only: `agent-memory ingest` the labelled development set, `agent-memory
build` once per setting (a rebuild with other vars only recompiles the recall statement and
recomputes strength; nothing is re-embedded), and `agent-memory recall --batch --no-access` for
every question. A result hits a question when its source_message_ids include one of the
question's evidence message_ids. Metrics per category and overall:
  any@k       share of questions with at least one hit in the top k
  frac@k      share of a question's evidence messages covered by the top k, averaged
  ndcg@10     binary-relevance NDCG (ideal: min(|evidence|, 10) hits first)
  mrr         mean reciprocal rank of the first hit
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
AS_OF = "2026-09-06 00:00:00"  # the day after the development set's last message
# Each user's conversations are shifted in time so that every user's last message falls on the
# same day (order and gaps within a user are kept). Otherwise most users' memories have long
# decayed to the floor by AS_OF and the decay A/B would compare constants: the agent is assumed to
# ask right after each user's latest session.
MODES = [
    ("bm25", {"fusion_method": "lexical"}),
    ("vector", {"fusion_method": "vector"}),
    ("hybrid (shipped)", {}),
    # the single legs again without strength weighting, in case strength handicaps them
    ("bm25, no strength", {"fusion_method": "lexical", "strength_weight": 0.0}),
    ("vector, no strength", {"fusion_method": "vector", "strength_weight": 0.0}),
]
SINGLE_LEGS = ["bm25", "vector", "bm25, no strength", "vector, no strength"]
DECAY_SETTINGS = [
    ("shipped", {}),
    ("strength_weight 1 (reference)", {"strength_weight": 1.0}),
    ("decay 0.99/day", {"decay_rate_per_day": 0.99, "strength_weight": 1.0}),
    ("floor 0.6", {"strength_floor": 0.6, "strength_weight": 1.0}),
    ("strength ignored", {"strength_weight": 0.0}),
]
CATEGORIES = ["single", "multi_hop", "temporal"]


def cli(db: Path, *args: str, stdin: str | None = None) -> str:
    """Run the CLI; any failure aborts the harness (recall --batch errors are checked per line)."""
    exe = Path(sys.executable).with_name("agent-memory")
    proc = subprocess.run([str(exe), *args, "--db", str(db)], input=stdin, capture_output=True, text=True)
    ok = (0, 1) if args[0] == "recall" else (0,)
    if proc.returncode not in ok:
        raise SystemExit(f"agent-memory {args[0]} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def aligned_log(dest: Path) -> Path:
    """Write the development log with each user's timeline shifted to end on the set's last day."""
    from datetime import datetime

    fmt = "%Y-%m-%d %H:%M:%S"
    rows = [json.loads(line) for line in (DATA / "session_log.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    end = max(datetime.strptime(r["ts"], fmt) for r in rows)
    last: dict[str, datetime] = {}
    for r in rows:
        t = datetime.strptime(r["ts"], fmt)
        last[r["user_id"]] = max(last.get(r["user_id"], t), t)
    with open(dest, "w", encoding="utf-8") as fh:
        for r in rows:
            r["ts"] = (datetime.strptime(r["ts"], fmt) + (end - last[r["user_id"]])).strftime(fmt)
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return dest


def load_questions() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def run_batch(db: Path, questions: list[dict[str, Any]], top_k: int) -> dict[str, list[dict[str, Any]]]:
    lines = "".join(
        json.dumps({"id": q["question_id"], "user_id": q["user_id"], "query": q["query"], "top_k": top_k, "min_sim": -1},
                   ensure_ascii=False) + "\n"
        for q in questions
    )
    out = cli(db, "recall", "--batch", "-", "--no-access", stdin=lines)
    results: dict[str, list[dict[str, Any]]] = {}
    for line in out.splitlines():
        obj = json.loads(line)
        if "error" in obj:
            raise SystemExit(f"question {obj['id']} failed: {obj['error']}")
        results[obj["id"]] = obj["results"]
    return results


def score_question(evidence: set[str], results: list[dict[str, Any]], ks: list[int]) -> dict[str, float]:
    hits = [bool(evidence & set(r["source_message_ids"])) for r in results]
    m: dict[str, float] = {}
    for k in ks:
        m[f"any@{k}"] = float(any(hits[:k]))
        covered = set().union(*[evidence & set(r["source_message_ids"]) for r in results[:k]]) if results[:k] else set()
        m[f"frac@{k}"] = len(covered) / len(evidence)
    dcg = sum(1 / math.log2(i + 2) for i, h in enumerate(hits[:10]) if h)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(evidence), 10)))
    m["ndcg@10"] = dcg / idcg
    m["mrr"] = next((1 / (i + 1) for i, h in enumerate(hits) if h), 0.0)
    return m


def evaluate(questions: list[dict[str, Any]], results: dict[str, list[dict[str, Any]]], ks: list[int],
             owners: dict[str, str] | None = None) -> dict[str, dict[str, float]]:
    per_cat: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q in questions:
        res = results[q["question_id"]]
        m = score_question(set(q["evidence"]), res, ks)
        per_cat[q["category"]].append(m)
        per_cat["overall"].append(m)
    return {cat: {name: sum(x[name] for x in rows) / len(rows) for name in rows[0]} | {"n": len(rows)}
            for cat, rows in per_cat.items()}


def table(title: str, columns: list[str], scores: dict[str, dict[str, dict[str, float]]], metrics: list[str]) -> str:
    lines = [f"### {title}", "", "| category | metric | " + " | ".join(columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for cat in CATEGORIES + ["overall"]:
        n = int(scores[columns[0]][cat]["n"])
        for metric in metrics:
            vals = [scores[c][cat][metric] for c in columns]
            best = max(vals)
            cells = [f"**{v:.3f}**" if v == best and vals.count(best) == 1 else f"{v:.3f}" for v in vals]
            lines.append(f"| {cat} (n={n}) | {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "out"), help="work folder (the store is rebuilt there)")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 5, 10])
    ap.add_argument("--no-decay-ab", action="store_true", help="skip the decay A/B")
    ap.add_argument("--vars", default="{}", help="extra dbt vars (JSON) for every build, to try settings")
    args = ap.parse_args(argv)
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    db = out / "devset.duckdb"
    questions = load_questions()
    base_vars = json.loads(args.vars)
    print(f"development set: {len(questions)} questions; store {db}", flush=True)
    print(cli(db, "ingest", str(aligned_log(out / "session_log.aligned.jsonl"))).strip(), flush=True)
    top_k = max(max(args.k), 10)
    metrics = [f"any@{k}" for k in args.k] + [f"frac@{k}" for k in args.k] + ["ndcg@10", "mrr"]

    def measure(label: str, vars_: dict[str, Any]) -> dict[str, dict[str, float]]:
        cli(db, "build", "--vars", json.dumps({"as_of": AS_OF, **base_vars, **vars_}))
        res = evaluate(questions, run_batch(db, questions, top_k), args.k)
        print(f"  {label}: any@10 {res['overall'].get('any@10', float('nan')):.3f}  "
              f"frac@10 {res['overall'].get('frac@10', float('nan')):.3f}", flush=True)
        return res

    modes = {label: measure(label, v) for label, v in MODES}
    report = [table("Retrieval: BM25 only vs vector only vs shipped hybrid (same store, same run)",
                    [m for m, _ in MODES], modes, metrics)]
    results: dict[str, Any] = {"as_of": AS_OF, "modes": modes}
    if not args.no_decay_ab:
        decay = {label: measure(label, v) for label, v in DECAY_SETTINGS}
        report.append(table("Decay A/B on the shipped hybrid", [d for d, _ in DECAY_SETTINGS], decay,
                            ["any@1", "any@5", "frac@10", "ndcg@10", "mrr"] if 5 in args.k else metrics))
        results["decay"] = decay
    cli(db, "build", "--vars", json.dumps({"as_of": AS_OF}))  # leave the store as shipped
    text = "\n\n".join(report)
    (out / "results.md").write_text(text + "\n", encoding="utf-8")
    (out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print()
    print(text)
    hybrid = modes["hybrid (shipped)"]["overall"]
    for metric in ("any@10", "frac@10"):
        if metric in hybrid:
            best_leg = max(SINGLE_LEGS, key=lambda m: modes[m]["overall"][metric])
            verdict = "beats" if hybrid[metric] > modes[best_leg]["overall"][metric] else "does NOT beat"
            print(f"shipped hybrid {metric} {hybrid[metric]:.3f} {verdict} the best single leg "
                  f"({best_leg}: {modes[best_leg]['overall'][metric]:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
