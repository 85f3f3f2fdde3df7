"""Drive the public CLI for the recall-quality sets: ingest, build per setting, recall --batch.

Every set goes through the same steps: `agent-memory ingest` a session log, `agent-memory build`
once per setting of MODES (a rebuild with other vars only recompiles the recall statement and
recomputes strength; nothing is re-extracted or re-embedded), and `agent-memory recall --batch
--no-access` for every question, so that evaluating never reinforces a memory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

# (label, dbt vars) of each retrieval setting; the first three are the yardsticks of every set
MODES: list[tuple[str, dict[str, Any]]] = [
    ("bm25", {"fusion_method": "lexical"}),
    ("vector", {"fusion_method": "vector"}),
    ("hybrid (shipped)", {}),
    # the single legs again without strength weighting, in case strength handicaps them
    ("bm25, no strength", {"fusion_method": "lexical", "strength_weight": 0.0}),
    ("vector, no strength", {"fusion_method": "vector", "strength_weight": 0.0}),
]
YARDSTICK_MODES = MODES[:3]
SHIPPED = "hybrid (shipped)"
# the three yardsticks again with strength ignored (strength_weight 0): the ranking a store gets
# when every memory has decayed to the floor, e.g. when as_of is long after the conversation
NO_STRENGTH_MODES: list[tuple[str, dict[str, Any]]] = [
    ("bm25, no strength", {"fusion_method": "lexical", "strength_weight": 0.0}),
    ("vector, no strength", {"fusion_method": "vector", "strength_weight": 0.0}),
    ("hybrid, no strength", {"strength_weight": 0.0}),
]


def parse_try(text: str) -> tuple[str, dict[str, Any]]:
    """A candidate setting from ``--try LABEL=JSON`` (label, dbt vars over the shipped ones);
    ValueError when the text is not a label, '=' and a JSON object."""
    label, sep, raw = text.partition("=")
    if not sep or not label.strip():
        raise ValueError(f"--try wants LABEL=JSON, got {text!r}")
    try:
        vars_ = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--try {label}: not JSON: {exc}") from None
    if not isinstance(vars_, dict):
        raise ValueError(f"--try {label}: the vars must be a JSON object")
    return label.strip(), vars_


def existing_store(db: Path, reuse: bool) -> bool:
    """Whether a set may skip ingesting: --reuse and the store is already there (a later build
    then extracts and embeds only what the code change touches)."""
    return reuse and db.exists()


def cli(db: Path, *args: str, stdin: str | None = None) -> str:
    """Run the CLI; any failure aborts the harness (recall --batch errors are checked per line)."""
    exe = Path(sys.executable).with_name("agent-memory")
    proc = subprocess.run([str(exe), *args, "--db", str(db)], input=stdin, capture_output=True, text=True)
    ok = (0, 1) if args[0] == "recall" and "--batch" in args else (0,)
    if proc.returncode not in ok:
        raise SystemExit(f"agent-memory {args[0]} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def build(db: Path, as_of: str, vars_: dict[str, Any]) -> None:
    cli(db, "build", "--vars", json.dumps({"as_of": as_of, **vars_}))


def run_batch(db: Path, requests: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Recall every request ({"id", "user_id", "query", "top_k", "min_sim"}) in one CLI process,
    without recording accesses. Returns id -> ranked results (as_dict of each memory)."""
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests)
    out = cli(db, "recall", "--batch", "-", "--no-access", stdin=lines)
    results: dict[str, list[dict[str, Any]]] = {}
    for line in out.splitlines():
        obj = json.loads(line)
        if "error" in obj:
            raise SystemExit(f"question {obj['id']} failed: {obj['error']}")
        results[str(obj["id"])] = obj["results"]
    missing = {str(r["id"]) for r in requests} - set(results)
    if missing:
        raise SystemExit(f"recall --batch returned no line for {sorted(missing)[:5]}")
    return results


def prompt_block(db: Path, user_id: str, query: str) -> str:
    """The system-prompt block the CLI prints for one query (default top_k, threshold, budget)."""
    return cli(db, "recall", query, "--user", user_id, "--prompt", "--no-access")


def recall_json(db: Path, user_id: str, query: str) -> list[dict[str, Any]]:
    """One query with the CLI's defaults (the same memories the prompt block is built from)."""
    return json.loads(cli(db, "recall", query, "--user", user_id, "--json", "--no-access"))


def store_counts(db: Path) -> dict[str, Any]:
    """Messages, embedded texts and memories by kind, read from the built store's tables."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        messages = con.execute("select count(*) from session_messages").fetchone()[0]
        embedded = con.execute("select count(*) from int_memory_embeddings").fetchone()[0]
        kinds = dict(con.execute("select kind, count(*) from long_term_memory group by kind order by kind").fetchall())
    finally:
        con.close()
    return {"messages": messages, "embedded_texts": embedded,
            "embedded_per_message": embedded / messages if messages else float("nan"), "memories": kinds}


def measure_modes(db: Path, as_of: str, modes: list[tuple[str, dict[str, Any]]], base_vars: dict[str, Any],
                  requests: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Build once per mode and recall every request; the store is left built as shipped."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for label, vars_ in modes:
        build(db, as_of, {**base_vars, **vars_})
        out[label] = run_batch(db, requests)
        print(f"  {label}: recalled {len(requests)} questions", flush=True)
    if modes and modes[-1][1]:
        build(db, as_of, base_vars)
    return out
