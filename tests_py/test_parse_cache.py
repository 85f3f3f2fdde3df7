"""dbt's parse is shared between stores (recall_shim/build/parse_cache.py): the first build of a
new store reuses another store's parse, builds the same data, and a broken cache entry costs a
parse, never a build. The parse of another copy of the project (its absolute seed paths) is never
reused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from recall_shim import MemoryStore
from recall_shim.build.parse_cache import CACHE_ENV

from .conftest import ROOT, query

LOG = [
    {"user_id": "ann", "session_id": "s1", "msg_seq": 1, "role": "user", "content": "I'm allergic to peanuts.",
     "ts": "2026-11-02 09:00:00", "message_id": "ann-1"},
    {"user_id": "ann", "session_id": "s1", "msg_seq": 2, "role": "user", "content": "My sister is called Mira.",
     "ts": "2026-11-02 09:01:00", "message_id": "ann-2"},
]


def _build(folder: Path) -> tuple[str, list[tuple]]:
    store = MemoryStore(folder / "store.duckdb")
    store.remember_many(LOG)
    store.build()
    log = (store.paths.dbt_dir / "logs" / "dbt.log").read_text(encoding="utf-8")
    return log, query(store, "select memory_id, kind, content, strength from long_term_memory order by memory_id")


def test_a_new_store_reuses_the_parse_and_a_broken_entry_costs_only_a_parse(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    first_log, first = _build(tmp_path / "a")
    assert "Starting full parse" in first_log
    assert first, "the build extracted no memory"
    entries = list(cache.glob("*.msgpack"))
    assert len(entries) == 1

    second_log, second = _build(tmp_path / "b")  # another folder, the same store name
    assert "Starting full parse" not in second_log and "skipping partial parsing" in second_log
    assert second == first

    entries[0].write_bytes(b"not a parse")  # newer than nothing: seeded into the next new store
    third_log, third = _build(tmp_path / "c")
    assert "Failed to load parsed file" in third_log
    assert third == first
    assert entries[0].read_bytes() != b"not a parse", "the build's own parse replaces the broken entry"

    # a store whose builds alternate run settings gets each setting's parse back from the cache
    # (its own folder holds the parse of the last settings only)
    store = MemoryStore(tmp_path / "a" / "store.duckdb")
    log = store.paths.dbt_dir / "logs" / "dbt.log"
    store.build(vars={"as_of": "2026-11-03 12:00:00"})  # other --vars: dbt parses again
    assert log.read_text(encoding="utf-8").count("Unable to do partial parsing") == 2
    store.remember("ann", "I live in Bergen.", session_id="s2", msg_seq=1, ts="2026-11-03 09:00:00",
                   message_id="ann-3")
    store.build()  # back to no --vars: that parse is seeded back, not made again
    assert log.read_text(encoding="utf-8").count("Unable to do partial parsing") == 2, "the parse was not reused"
    assert "User lives in Bergen" in {r[0] for r in query(store, "select content from long_term_memory")}

    # another copy of the project (another checkout, another environment's installed package) with
    # the same files: its parse holds other absolute paths (seed files), so it is never seeded
    # from this copy's, which would read this copy's seeds or fail once this copy is gone
    copy = tmp_path / "project-copy"
    copy.mkdir()
    for part in ("dbt_project.yml", "profiles.yml", "models", "macros", "seeds", "snapshots", "tests", "analyses"):
        (shutil.copytree if (ROOT / part).is_dir() else shutil.copy2)(ROOT / part, copy / part)
    monkeypatch.setenv("AGENT_MEMORY_PROJECT", str(copy))
    copy_log, copied = _build(tmp_path / "d")
    assert "Starting full parse" in copy_log, "the parse of another project folder was seeded"
    assert copied == first
