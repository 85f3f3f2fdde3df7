"""Recall quality yardsticks: BM25 only vs vector only vs the shipped hybrid, side by side.

    python -m benchmarks.recall_quality                      # the template development set (regression)
    python -m benchmarks.recall_quality --probes [PATH]      # the hand-written everyday probe set
    python -m benchmarks.recall_quality --locomo PATH        # LoCoMo's data/locomo10.json (you download it)
    python -m benchmarks.recall_quality --all --locomo PATH  # all three

Drives the public interface only: `agent-memory ingest` a session log, `agent-memory build` once
per setting (a rebuild with other vars only recompiles the recall statement and recomputes
strength; nothing is re-embedded), `agent-memory recall --batch --no-access` for every question
(evaluation never reinforces). A result hits when its source_message_ids include one of the
question's evidence message_ids. Each set works in its own folder under --out (wiped first) and
writes results.md and results.json there. Metrics: benchmarks/recall_quality/metrics.py.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any, Callable

from . import runner
from .locomo import LocomoFormatError
from .probes import ProbeFormatError

HERE = Path(__file__).resolve().parent
DEFAULT_PROBES = HERE / "probes" / "everyday.json"
LOCOMO_DEFAULT_FORM = "speaker"


def _fresh(path: Path, reuse: bool = False) -> Path:
    if not reuse:
        shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write(folder: Path, text: str, results: dict[str, Any]) -> None:
    (folder / "results.md").write_text(text + "\n", encoding="utf-8")
    (folder / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    print()
    print(text, flush=True)
    print(flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.recall_quality", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "out"), help="work folder (one subfolder per set, rebuilt each run)")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 5, 10], help="cut-offs of any@k and frac@k")
    ap.add_argument("--vars", default="{}", help="extra dbt vars (JSON) for every build, to try settings")
    ap.add_argument("--no-decay-ab", action="store_true", help="development set: skip the decay A/B")
    ap.add_argument("--probes", nargs="?", const=str(DEFAULT_PROBES), default=None, metavar="PATH",
                    help=f"run the everyday probe set (default {DEFAULT_PROBES.relative_to(HERE.parents[1])})")
    ap.add_argument("--locomo", default=None, metavar="PATH",
                    help="run LoCoMo from this locomo10.json (snap-research/LoCoMo, CC BY-NC 4.0; never copied)")
    ap.add_argument("--locomo-content", default=LOCOMO_DEFAULT_FORM, choices=["text", "speaker", "both"],
                    help="LoCoMo message content: the turn text, '<speaker>: <text>', or both (two stores)")
    ap.add_argument("--locomo-images", choices=("caption", "none"), default="caption",
                    help="LoCoMo turns that share a photo: append its caption as LoCoMo's evaluation prompts do "
                         "('<text> [shares <caption>]', the default) or drop it (the mapping before 2026-12-07)")
    ap.add_argument("--locomo-no-strength", action="store_true",
                    help="LoCoMo: also measure the three settings with strength ignored (strength_weight 0)")
    ap.add_argument("--try", dest="tries", action="append", default=[], metavar="LABEL=JSON",
                    help="measure a candidate setting beside the yardsticks, in the same run on the same store "
                         "(dbt vars over the shipped ones, e.g. 'sw 0.1={\"strength_weight\": 0.1}'); repeatable")
    ap.add_argument("--reuse", action="store_true",
                    help="keep each set's folder and built store from the previous run (skip ingest): after a "
                         "code change the builds only redo what it touches, LoCoMo's 22-minute embedding included")
    ap.add_argument("--all", action="store_true", help="development set, probes and LoCoMo (needs --locomo PATH)")
    args = ap.parse_args(argv)
    if args.all and args.locomo is None:
        ap.error("--all needs --locomo PATH (LoCoMo is not shipped: download data/locomo10.json yourself)")
    if args.all and args.probes is None:
        args.probes = str(DEFAULT_PROBES)
    run_devset = args.all or (args.probes is None and args.locomo is None)
    out = Path(args.out)
    base_vars = json.loads(args.vars)
    try:
        tries = [runner.parse_try(t) for t in args.tries]
    except ValueError as exc:
        ap.error(str(exc))
    jobs: list[tuple[str, Callable[[Path], tuple[str, dict[str, Any]]]]] = []
    if run_devset:
        from . import devset

        jobs.append(("devset", lambda d: devset.run(d, args.k, base_vars, not args.no_decay_ab, tries, args.reuse)))
    if args.probes is not None:
        from . import probes

        jobs.append(("probes", lambda d: probes.run(Path(args.probes), d, base_vars, tries, args.reuse)))
    if args.locomo is not None:
        from . import locomo

        forms = ([LOCOMO_DEFAULT_FORM] + [f for f in ("text", "speaker") if f != LOCOMO_DEFAULT_FORM]
                 if args.locomo_content == "both" else [args.locomo_content])
        modes = (runner.YARDSTICK_MODES + (runner.NO_STRENGTH_MODES if args.locomo_no_strength else [])
                 + tries)
        jobs.append(("locomo", lambda d: locomo.run(Path(args.locomo), d, forms, args.k, base_vars, modes,
                                                    args.reuse, args.locomo_images)))
    try:  # check the input files before any set runs (the development set takes minutes)
        if args.probes is not None:
            probes.load_probes(Path(args.probes))
        if args.locomo is not None:
            locomo.load_locomo(Path(args.locomo))
    except (ProbeFormatError, LocomoFormatError) as exc:
        raise SystemExit(f"error: {exc}") from None
    for name, job in jobs:
        folder = _fresh(out / name, args.reuse)
        text, results = job(folder)
        _write(folder, text, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
