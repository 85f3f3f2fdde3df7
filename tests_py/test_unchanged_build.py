"""A plain build with nothing to do does not run dbt (recall_shim/build/inputs.py): nothing
landed, no access event, no forget, the project, the environment's settings and the warehouse
unchanged, and the last build younger than var unchanged_build_max_age_hours. Anything of those
changing makes the next build run dbt again. One real store, built for real: a copy of the session's
demo store (the demo log ingested and built), whose builds here run dbt only when they must."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from recall_shim import MemoryStore
from recall_shim.build.inputs import RECORD, inputs_before, unchanged_since_last_build

from .conftest import copy_store, query

EXE = str(Path(sys.executable).with_name("agent-memory"))


def _run_results(store: MemoryStore) -> int:
    """dbt's own record of its last run: rewritten by every dbt invocation."""
    return (store.paths.dbt_dir / "target" / "run_results.json").stat().st_mtime_ns


def _would_skip(store: MemoryStore) -> bool:
    """What the skip rule says now about a plain build (the call MemoryStore.build makes for it)."""
    return unchanged_since_last_build(store.paths, inputs_before(store.paths)) is not None


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, demo_store: MemoryStore) -> MemoryStore:
    """A copy of the demo store (conftest: DEMO_LOG ingested, then a plain build, which ran dbt) with
    its dbt folder (that build's record and dbt's target): the copy keeps every file's size and
    modification time, so it is the store the demo's build left, and the next plain build has
    nothing to do (when something differs, e.g. an access landed in the demo store, it builds)."""
    s = MemoryStore(copy_store(demo_store.paths.db, tmp_path_factory.mktemp("unchanged")))
    shutil.copytree(demo_store.paths.dbt_dir, s.paths.dbt_dir)
    first = s.build()
    assert first.snapshot and Path(first.snapshot).exists()
    return s


def test_a_second_build_with_nothing_new_runs_no_dbt(store: MemoryStore) -> None:
    before = store.build()
    ran = _run_results(store)
    res = store.build()
    assert res.skipped and res.index is None and "nothing to build" in res.output
    assert res.snapshot == before.snapshot and Path(res.snapshot).exists()
    assert _run_results(store) == ran  # dbt did not run
    assert store.recall("喜欢什么输出方式", user_id="demo", min_sim=0, record_access=False)


def test_a_new_message_an_access_or_a_forget_builds_again(store: MemoryStore) -> None:
    store.build()
    store.remember("demo", "My favourite tea is hojicha.", session_id="s7", msg_seq=1, ts="2026-11-09 09:00:00")
    res = store.build()
    assert not res.skipped and "hojicha" in " ".join(m.content for m in store.recall(
        "what tea does the user like?", user_id="demo", min_sim=0, top_k=3, record_access=False))
    assert store.build().skipped
    store.recall("what tea does the user like?", user_id="demo", min_sim=0, top_k=1, record_access=True)
    assert not store.build().skipped  # the access event reinforces: a real build
    assert store.build().skipped
    hojicha = query(store, "select memory_id from long_term_memory where content ilike '%hojicha%' limit 1")[0][0]
    store.forget(memory_id=hojicha, user_id="demo")
    assert not store.build().skipped


def _age_record(store: MemoryStore, hours: float) -> None:
    """Make the last build's record ``hours`` old."""
    path = store.paths.dbt_dir / RECORD
    record = json.loads(path.read_text())
    record["at"] = (datetime.now(timezone.utc) - timedelta(hours=hours)).isoformat()
    path.write_text(json.dumps(record))


def test_an_old_build_a_changed_warehouse_or_run_settings_build_again(store: MemoryStore) -> None:
    """Each cause alone, from a store whose plain build is skipped. An old record and vars run dbt
    here; for a written warehouse and a changed environment the skip rule is asked directly (the
    function MemoryStore.build consults): the build a changed environment runs is real in
    test_seeds_the_last_build_loaded_are_left_out_until_the_project_or_settings_change."""
    store.build()
    assert store.build().skipped and _would_skip(store)
    # the last build is older than var unchanged_build_max_age_hours (24): decay is due
    _age_record(store, 23)
    assert store.build().skipped
    _age_record(store, 25)
    assert not store.build().skipped
    assert _would_skip(store)
    # the warehouse written since the build (here: only its modification time)
    st = store.paths.db.stat()
    os.utime(store.paths.db, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert not _would_skip(store)
    os.utime(store.paths.db, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _would_skip(store)
    # a changed setting in the environment (AGENT_MEMORY_*, DBT_*)
    os.environ["AGENT_MEMORY_UNCHANGED_TEST"] = "1"
    try:
        assert not _would_skip(store)
    finally:
        del os.environ["AGENT_MEMORY_UNCHANGED_TEST"]
    assert _would_skip(store)
    # vars, select or a full refresh always run dbt: vars over a store the rule would skip
    assert not store.build(vars={"as_of": "2026-12-01 00:00:00"}).skipped


def test_the_cli_says_nothing_was_built(store: MemoryStore) -> None:
    store.build()
    out = subprocess.run([EXE, "build", "--db", str(store.paths.db)], capture_output=True, text=True, timeout=600,
                         env={k: v for k, v in os.environ.items()})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("nothing to build") and "serving snapshot:" in out.stdout


def _ran(store: MemoryStore) -> set[str]:
    results = json.loads((store.paths.dbt_dir / "target" / "run_results.json").read_text())["results"]
    return {r["unique_id"] for r in results}


def test_seeds_the_last_build_loaded_are_left_out_until_the_project_or_settings_change(store: MemoryStore) -> None:
    """A build that runs (a message landed) over seeds the last build loaded from the same project
    leaves out the seeds and the tests that read only seeds (inputs.SEEDS_CURRENT_SELECT); every
    data test that reads a model still runs, the one between a model and a seed included. Its last
    build is the real build a changed environment alone runs (the rule skips a plain build before)."""
    store.build()  # runs dbt unless the last build's seeds are this project's, in this environment
    store.remember("demo", "My favourite biscuit is a stroopwafel.", session_id="s8", msg_seq=1, ts="2026-11-10 09:00:00")
    res = store.build()
    assert not res.skipped
    ran = _ran(store)
    assert not [u for u in ran if u.startswith("seed.")], "seeds ran again"
    assert not [u for u in ran if u.startswith("test.") and "seed_fidelity" in u]
    assert not [u for u in ran if u.startswith("test.agent_memory.unique_extraction_rules")]
    assert [u for u in ran if "relationships_int_memories_extracted_rule_id" in u], "a model-to-seed test was left out"
    assert {"model.agent_memory.long_term_memory", "model.agent_memory.int_memories_extracted"} <= ran
    assert "stroopwafel" in " ".join(m.content for m in store.recall(
        "which biscuit does the user like?", user_id="demo", min_sim=0, top_k=3, record_access=False))
    # a changed setting in the environment (AGENT_MEMORY_*, DBT_*) runs dbt, though nothing else
    # changed, and the seeds are loaded and tested again
    assert _would_skip(store)
    os.environ["AGENT_MEMORY_SEEDS_TEST"] = "1"
    try:
        assert not store.build().skipped
    finally:
        del os.environ["AGENT_MEMORY_SEEDS_TEST"]
    ran = _ran(store)
    assert "seed.agent_memory.extraction_rules" in ran and [u for u in ran if "seed_fidelity" in u]
