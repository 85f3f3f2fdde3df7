"""The contract between the dbt project and the shim (docs/architecture.md "One contract between
dbt and Python"): the store layout and the PostgreSQL landing tables are defined once (vars of
dbt_project.yml both sides read), and what a build published is read from the manifest the build
writes, not from dbt's log.

One store is built once, in a copy of the project whose store layout names differ from the
shipped ones and whose publish log message is reworded: the macros and the shim must agree on
every name through the one definition, and the shim must still find what the build published."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from recall_shim import MemoryStore
from recall_shim.errors import InvalidInput
from recall_shim.common.paths import PROJECT_ENV, StorePaths, project_vars, store_layout
from recall_shim.targets.postgres.server import LANDING_SOURCES, LANDING_TABLES
from recall_shim.serving.snapshot import published_snapshot, read_manifest, serving_tables

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PARTS = ("dbt_project.yml", "profiles.yml", "models", "macros", "seeds", "snapshots", "tests", "analyses")
LOG_TEXT = "publishing serving snapshot "
# the copy's layout: every name the macros and the reader use differs from the shipped one
CHANGED = {"inbox": ".landing", "serving": ".published", "empty_marker": "_none.jsonl", "manifest": "last.json",
           "build_lock": ".builder.lock", "dbt": ".dbt-run", "snapshot_prefix": "pub-", "ready": ".done"}


def copy_project(dest: Path) -> Path:
    """A copy of the dbt project (no target/, data/ or venv)."""
    dest.mkdir(parents=True)
    for part in PROJECT_PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("target", "__pycache__"))
        elif src.is_file():
            shutil.copy2(src, dest / part)
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryStore, object, Path]]:
    """(store, its BuildResult, the project copy) after one build in a project whose publish
    log message says something else."""
    tmp = tmp_path_factory.mktemp("contract")
    project = copy_project(tmp / "project")
    publish = project / "macros" / "publish.sql"
    text = publish.read_text(encoding="utf-8")
    assert LOG_TEXT in text
    publish.write_text(text.replace(LOG_TEXT, "wrote the snapshot file "), encoding="utf-8")
    conf = project / "dbt_project.yml"
    conf_text = conf.read_text(encoding="utf-8")
    for key, value in CHANGED.items():
        conf_text, n = re.subn(rf"^(    {key}: )\S+", rf"\g<1>{value}", conf_text, count=1, flags=re.M)
        assert n == 1, key
    conf.write_text(conf_text, encoding="utf-8")
    mp = pytest.MonkeyPatch()
    mp.setenv(PROJECT_ENV, str(project))
    store = MemoryStore(tmp / "store.duckdb")
    store.remember("ann", "I live in Lisbon and I work as a nurse.", session_id="s1")
    store.remember("ann", "My favourite food is grilled sardines.", session_id="s1")
    result = store.build()
    yield store, result, project
    store.close()
    mp.undo()


def test_the_layout_is_defined_once(built: tuple[MemoryStore, object, Path]) -> None:
    """Changed in dbt_project.yml only, the layout moved on both sides: the shim landed into the
    folders the build read, and the build published where the shim reads."""
    store, result, _ = built
    stem = store.paths.db.with_suffix("")
    assert store.paths.inbox == Path(f"{stem}.landing") and store.paths.serving == Path(f"{stem}.published")
    assert (store.paths.messages / "_none.jsonl").exists() and not (store.paths.messages / "_empty.jsonl").exists()
    assert not Path(f"{stem}.inbox").exists() and not Path(f"{stem}.serving").exists()
    assert (store.paths.serving / "last.json").exists() and not (store.paths.serving / "published.json").exists()
    assert Path(f"{stem}.builder.lock").exists() and (Path(f"{stem}.dbt-run") / "target" / "run_results.json").exists()
    assert str(result.snapshot).startswith(str(store.paths.serving))  # type: ignore[attr-defined]
    hits = store.recall("where does ann live", user_id="ann", min_sim=0.0, record_access=False)
    assert any("Lisbon" in m.content for m in hits)


def test_python_reads_the_shipped_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROJECT_ENV, raising=False)  # this checkout's project, not the module's copy
    shipped = yaml.safe_load((ROOT / "dbt_project.yml").read_text(encoding="utf-8"))["vars"]
    assert project_vars()["store_layout"] == shipped["store_layout"]
    assert vars(store_layout()) == shipped["store_layout"]
    sources = yaml.safe_load((ROOT / LANDING_SOURCES).read_text(encoding="utf-8"))["sources"]
    assert dict(LANDING_TABLES) == {t["name"]: t["identifier"] for s in sources if s["name"] == "landing"
                                    for t in s["tables"]}
    assert set(serving_tables()) == set(shipped["serving_tables"])
    assert serving_tables()["memory_term_index"] == f"order by {shipped['serving_tables']['memory_term_index']}"
    paths = StorePaths.of("/tmp/contract-check/s.duckdb")
    assert paths.write_lock == paths.inbox / shipped["store_layout"]["write_lock"]


def test_no_second_copy_of_a_layout_name() -> None:
    """The names of var store_layout and the landing tables' identifiers appear as quoted literals in no module
    or macro: each side reads the one definition."""
    shipped = yaml.safe_load((ROOT / "dbt_project.yml").read_text(encoding="utf-8"))["vars"]
    names = [v for k, v in shipped["store_layout"].items()
             if k not in ("messages", "access", "forget")]
    sources = yaml.safe_load((ROOT / LANDING_SOURCES).read_text(encoding="utf-8"))["sources"]
    names += [t["identifier"] for s in sources if s["name"] == "landing" for t in s["tables"]]
    offenders = []
    for f in [*sorted((ROOT / "recall_shim").rglob("*.py")), *sorted((ROOT / "macros").glob("*.sql"))]:
        text = f.read_text(encoding="utf-8")
        for name in names:
            if re.search(rf"""["']{re.escape(name)}["']""", text):
                offenders.append(f"{f.name}: {name}")
    assert offenders == []


def test_a_run_cannot_override_the_layout(built: tuple[MemoryStore, object, Path]) -> None:
    store, _, _ = built
    with pytest.raises(InvalidInput, match="store_layout"):
        store.build(vars={"store_layout": {"inbox": ".x"}})


def test_build_reads_the_manifest_not_the_log(built: tuple[MemoryStore, object, Path]) -> None:
    store, result, _ = built
    assert LOG_TEXT not in result.output  # type: ignore[attr-defined]
    manifest = read_manifest(store.paths)
    assert manifest is not None
    assert result.snapshot == str(store.paths.serving / manifest.snapshot)  # type: ignore[attr-defined]
    assert result.index is not None  # type: ignore[attr-defined]  (the index follows the manifest)
    run = json.loads((store.paths.dbt_dir / "target" / "run_results.json").read_text())
    assert manifest.invocation_id == run["metadata"]["invocation_id"]
    assert (manifest.kind, manifest.layers) == ("base", (manifest.snapshot,))
    assert manifest.built_at.endswith("Z") and manifest.reason
    assert store.recall("where does ann live", user_id="ann", min_sim=0.0, record_access=False)


def test_a_manifest_of_another_run_is_not_this_build(built: tuple[MemoryStore, object, Path], tmp_path: Path) -> None:
    store, result, _ = built
    target = tmp_path / "target"
    target.mkdir()
    (target / "run_results.json").write_text(json.dumps({"metadata": {"invocation_id": "another-run"}}))
    assert published_snapshot(store.paths, target) is None
    assert published_snapshot(store.paths, tmp_path / "no-target") is None
    own = store.paths.dbt_dir / "target"
    assert published_snapshot(store.paths, own) == Path(result.snapshot)  # type: ignore[attr-defined]


def test_a_torn_or_foreign_manifest_reads_as_none(tmp_path: Path) -> None:
    paths = StorePaths.of(tmp_path / "s.duckdb").ensure()
    manifest = paths.serving / paths.layout.manifest
    snap = f"{paths.layout.snapshot_prefix}1"
    manifest.write_text('{"snapshot": "%s.duckdb", "kind": "ba' % snap)
    assert read_manifest(paths) is None
    for name in (f"../{snap}.duckdb", "other.duckdb", f"{snap}{paths.layout.ready}", f"{snap}.duckdb"):
        manifest.write_text(json.dumps({"snapshot": name, "kind": "base", "reason": "", "layers": [name],
                                        "built_at": "", "invocation_id": "x"}))
        assert (read_manifest(paths) is None) == (name != f"{snap}.duckdb"), name
