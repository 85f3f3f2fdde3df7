"""The analyst's view: `dbt docs generate` documents the lineage from the session log to every
mart and exposure, and the ready queries in analyses/ compile and answer on a real store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest

from recall_shim import MemoryStore

from .conftest import ROOT, query

ANALYSES = {"memories_per_kind_and_user", "strength_distribution", "most_and_least_accessed", "decay_curves",
            "last_build_additions", "llm_token_usage"}


@pytest.fixture(scope="module")
def docs(demo_store: MemoryStore) -> Path:
    """Run `dbt docs generate` for the demo store (as the shim runs dbt); returns its target dir."""
    target = demo_store.paths.dbt_dir / "target"
    env = {**os.environ, "AGENT_MEMORY_DB": str(demo_store.paths.db), "DBT_TARGET_PATH": str(target),
           "DBT_LOG_PATH": str(demo_store.paths.dbt_dir / "logs"), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    dbt = str(Path(sys.executable).with_name("dbt"))
    out = subprocess.run([dbt, "docs", "generate", "--project-dir", str(ROOT), "--profiles-dir", str(ROOT)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    return target


def _ancestors(parent_map: dict[str, list[str]], node: str) -> set[str]:
    seen: set[str] = set()
    stack = [node]
    while stack:
        for p in parent_map.get(stack.pop(), []):
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def test_docs_document_the_lineage_to_every_mart_and_exposure(docs: Path) -> None:
    assert (docs / "index.html").is_file()
    manifest = json.loads((docs / "manifest.json").read_text())
    catalog = json.loads((docs / "catalog.json").read_text())
    nodes = manifest["nodes"]
    models = {k: n for k, n in nodes.items() if n["resource_type"] == "model"}
    undocumented = sorted(n["name"] for n in nodes.values()
                          if n["resource_type"] in ("model", "snapshot", "analysis") and not n["description"].strip())
    assert undocumented == []
    # every model exists in the warehouse, so the docs site shows its columns and types
    assert set(models) <= set(catalog["nodes"])
    session_log = "model.agent_memory.session_log"
    marts = [k for k, n in models.items() if n["path"].startswith("marts/")]
    assert {"model.agent_memory.long_term_memory", "model.agent_memory.llm_token_ledger"} <= set(marts)
    for mart in marts:
        assert session_log in _ancestors(manifest["parent_map"], mart), mart
    exposures = manifest["exposures"]
    assert {e["name"] for e in exposures.values()} >= {"recall_shim", "memory_server", "analyst_report"}
    for key, exposure in exposures.items():
        assert exposure["description"].strip() and exposure["owner"]["name"]
        assert session_log in _ancestors(manifest["parent_map"], key), key
    assert "doc.agent_memory.__overview__" in manifest["docs"]


def test_the_dag_shows_the_data(docs: Path) -> None:
    """Landing data enters through sources; refs live in model files; layers read only downward."""
    manifest = json.loads((docs / "manifest.json").read_text())
    models = {k: n for k, n in manifest["nodes"].items() if n["resource_type"] == "model"}
    layer = {k: n["path"].split("/")[0] for k, n in models.items()}
    assert {s["name"] for s in manifest["sources"].values() if s["source_name"] == "landing"} == {
        "messages", "access", "forget"}
    for key, node in models.items():
        parents = node["depends_on"]["nodes"]
        if layer[key] == "staging":
            assert any(p.startswith("source.agent_memory.landing.") for p in parents), key
            assert [p for p in parents if layer.get(p) == "staging"] == [], key
        if layer[key] == "intermediate":
            assert [p for p in parents if layer.get(p) in ("marts", "serving")] == [], key
    serving = {n["name"] for k, n in models.items() if layer[k] == "serving"}
    assert serving == {"memory_term_index", "memory_term_stats", "recall_queries", "recall_index_settings",
                       "saved_recall_results"}
    # serving tables keep the warehouse schema the shim opens them in
    assert {n["schema"] for n in models.values()} == {"main"}
    # macros take relations as arguments (macros/recall.sql aside); comments may name a ref
    for path in sorted((ROOT / "macros").glob("*.sql")):
        if path.name != "recall.sql":
            assert "ref(" not in re.sub(r"\{#.*?#\}", "", path.read_text(), flags=re.DOTALL), path.name
    # no post-hook deletes or updates rows of long_term_memory
    ltm = models["model.agent_memory.long_term_memory"]
    assert not any(("delete" in h["sql"] or "update" in h["sql"]) for h in ltm["config"]["post-hook"])


def _analysis(docs: Path, store: MemoryStore, name: str) -> list[tuple]:
    sql = (docs / "compiled" / "agent_memory" / "analyses" / f"{name}.sql").read_text()
    assert sql.lstrip().startswith("--"), f"{name} has no header comment"
    con = duckdb.connect(str(store.paths.db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_ready_analyses_compile_and_agree_with_the_marts(docs: Path, demo_store: MemoryStore) -> None:
    compiled = {p.stem for p in (docs / "compiled" / "agent_memory" / "analyses").glob("*.sql")}
    assert ANALYSES <= compiled
    total, current = query(demo_store, "select count(*), count(*) filter (where valid_to is null) from long_term_memory")[0]

    per_kind = _analysis(docs, demo_store, "memories_per_kind_and_user")
    assert sum(r[2] + r[3] for r in per_kind) == total
    assert {(r[0], r[1]) for r in per_kind} == set(query(demo_store, "select distinct user_id, kind from long_term_memory"))

    bins = _analysis(docs, demo_store, "strength_distribution")
    assert sum(r[3] for r in bins) == current
    strengths = dict(query(demo_store, "select memory_id, strength from long_term_memory where valid_to is null"))
    kinds = query(demo_store, "select kind, strength from long_term_memory where valid_to is null")
    for kind, lo, hi, n, _ in bins:
        inside = [x for k, x in kinds if k == kind and lo - 1e-9 <= x and (x < hi - 1e-9 or hi >= 1.0)]
        assert len(inside) == n, (kind, lo, hi)

    lists = defaultdict(list)
    for row in _analysis(docs, demo_store, "most_and_least_accessed"):
        lists[row[0]].append(row[1])
    assert lists["most_accessed"] == list(range(1, min(20, current) + 1)) == lists["least_accessed"]

    curves = _analysis(docs, demo_store, "decay_curves")
    projected = defaultdict(list)
    for memory_id, _, _, source, _, days_ahead, strength in curves:
        if source == "projected":
            projected[memory_id].append((days_ahead, strength))
    assert set(projected) == set(strengths)
    for memory_id, points in projected.items():
        values = [s for _, s in sorted(points)]
        assert len(values) == 60 and all(a >= b for a, b in zip(values, values[1:]))
        assert values[0] == pytest.approx(max(0.3, strengths[memory_id] * 0.95), rel=1e-9)
    assert {r[3] for r in curves} == {"observed", "projected"}

    added = _analysis(docs, demo_store, "last_build_additions")
    assert len(added) == total  # the demo store was built once: everything came from that build
    assert _analysis(docs, demo_store, "llm_token_usage") == []
