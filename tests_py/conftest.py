"""Shared fixtures: real stores in temporary folders, built with real dbt runs."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from recall_shim import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
DEMO_LOG = ROOT / "demo" / "session_log.jsonl"


def query(store: MemoryStore, sql: str, params: list | None = None) -> list[tuple]:
    """Read the warehouse (never while a build runs: tests build synchronously)."""
    con = duckdb.connect(str(store.paths.db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    """The demo log ingested and built once, shared read-only by recall tests."""
    store = MemoryStore(tmp_path_factory.mktemp("demo") / "demo.duckdb")
    store.ingest(DEMO_LOG)
    store.build()
    return store


@pytest.fixture()
def fresh_store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "store.duckdb")
