"""A store whose path holds quotes, spaces, %, Unicode and glob characters works end to end
(paths reach SQL only through one quoting function / macro), never reads another store's files
through a glob, and a path DuckDB cannot open is refused up front (docs/data_protection.md
"Settings and paths in SQL"). One build for the module."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recall_shim import InvalidInput, InvalidStorePath, MemoryStore

from .conftest import query

TS = "2026-11-01 10:00:00"
AS_OF = "2026-11-02T10:00:00.123456"
# ' and " (SQL quoting), space, %, Unicode, and [x]* which as a raw glob matches the sibling below
FOLDER = "it's \"odd\" 100% ü 記憶 [x]*"
SIBLING = "it's \"odd\" 100% ü 記憶 x-other"  # what FOLDER/... matches when pasted unescaped into a glob
PARQUET = "rows[1].parquet"  # read_parquet expands globs too: [1] would look for rows1.parquet


@pytest.fixture(scope="module")
def odd_store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    base = tmp_path_factory.mktemp("paths")
    sibling = MemoryStore(base / SIBLING / "store.duckdb")
    sibling.remember("intruder", "I live in Zqintrudertown.", ts=TS)
    store = MemoryStore(base / FOLDER / "store.duckdb")
    store.remember("alice", "I live in Zqalicetown.", ts=TS, message_id="a-1")
    store.remember("bob", "I live in Zqbobtown.", ts=TS, message_id="b-1")
    pq.write_table(pa.table({"user_id": ["carol"], "session_id": ["s1"], "msg_seq": [1], "role": ["user"],
                             "content": ["I live in Zqcaroltown."], "ts": [TS],
                             "message_id": ["c-1"]}), base / PARQUET)
    assert store.ingest(base / PARQUET).rows == 1
    # a legitimate as_of in the T form with a fraction (test_security_sql_vars.py refuses bad ones)
    store.build(vars={"as_of": AS_OF})
    return store


def recalled(store: MemoryStore, user: str) -> set[str]:
    return {m.content for m in store.recall("where does the user live?", user_id=user, min_sim=-1, top_k=20,
                                            record_access=False)}


def test_build_and_recall_in_a_folder_with_quotes_spaces_and_glob_characters(odd_store: MemoryStore) -> None:
    assert any("Zqalicetown" in c for c in recalled(odd_store, "alice"))
    assert FOLDER in str(odd_store.snapshot_path)  # served from the snapshot published in that folder
    # the parquet file was read by its own name, not as a glob
    assert any("Zqcaroltown" in c for c in recalled(odd_store, "carol"))


def test_as_of_with_t_and_fraction_builds(odd_store: MemoryStore) -> None:
    assert query(odd_store, "select distinct built_at from main.recall_queries") == [(datetime(2026, 11, 2, 10, 0, 0, 123456),)]


def test_landing_glob_reads_only_this_store(odd_store: MemoryStore) -> None:
    users = {r[0] for r in query(odd_store, "select distinct user_id from main.session_messages")}
    assert users == {"alice", "bob", "carol"}


def test_forget_in_that_folder(odd_store: MemoryStore) -> None:
    # last in the module: it changes the store (purges bob, publishes a purged snapshot)
    report = odd_store.forget(user_id="bob")
    assert report.found and report.messages >= 1
    assert recalled(odd_store, "bob") == set()
    assert any("Zqalicetown" in c for c in recalled(odd_store, "alice"))


@pytest.mark.parametrize("name", ["back\\slash", "question?mark"])
def test_store_path_duckdb_cannot_open_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidStorePath, match="DuckDB cannot open"):
        MemoryStore(tmp_path / name / "store.duckdb")
    assert issubclass(InvalidStorePath, InvalidInput)
    assert not (tmp_path / name).exists()  # refused before any folder is made
