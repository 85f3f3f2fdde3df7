"""dbt's parse, shared by the builds of one project: the first build of a new store (and a build
with run settings another store used) reuses a parse instead of spending ~7 s parsing again.

dbt keeps its parse in ``<target>/partial_parse.msgpack`` and reuses it only when everything that
can change a parse is unchanged: dbt's version, the project's files, ``--vars``, the target's
connection settings and the environment variables the project reads. Every store has its own
target folder, so each new store parsed the project from scratch. This module keeps the newest
parse of each *parse key* (the settings dbt compares that vary between stores: the store's file
name, ``--vars``, the target; and the project folder, since a parse holds absolute paths) in one
cache folder and seeds a store's target folder with it before dbt runs. The target folder records the key of the parse it holds (``partial_parse.key``),
so a store whose builds alternate run settings (a plain build, then one with ``as_of``, then a
plain one again) gets the parse of each setting back instead of parsing on every change. dbt
itself still checks the seeded parse and parses again when anything differs (a changed project,
another dbt version), so a stale entry costs what no cache costs.

For the key to be the same across stores of the DuckDB target, dbt runs in the store's folder
with the store named by its file name (recall_shim/targets/duckdb.py): the paths dbt sees, and
so its parse, do not depend on where the store lives.

The cache folder is ``$AGENT_MEMORY_PARSE_CACHE``, else ``dbt-parse`` in the per-user cache
folder (``platformdirs.user_cache_dir("agent-memory")``). A cache that cannot be read or
written is skipped: it only ever saves time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Mapping

from recall_shim.common.paths import project_dir

__all__ = ["CACHE_ENV", "cache_dir", "parse_key", "seed_parse", "keep_parse"]

CACHE_ENV = "AGENT_MEMORY_PARSE_CACHE"
_PARSE_FILE = "partial_parse.msgpack"
_KEY_FILE = "partial_parse.key"  # beside dbt's parse in a target folder: the key of that parse
_KEPT = 64  # entries kept (newest first); one per store name x run settings in use


def cache_dir() -> Path:
    """The folder that holds the shared parses."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given)
    import platformdirs

    return Path(platformdirs.user_cache_dir("agent-memory", appauthor=False)) / "dbt-parse"


def parse_key(target: str, name: str, vars: Mapping[str, Any] | None, connection: Mapping[str, str] | None = None) -> str:
    """The key of the parse dbt would make of this project folder for ``target`` with the store
    named ``name``, run settings ``vars`` and (PostgreSQL) the connection settings ``connection``.
    The folder is part of the key: a parse holds absolute paths (a seed's file), so the parse of
    another copy of the project (another checkout, another environment's installed package) is
    never seeded, even when dbt would find every file unchanged."""
    blob = json.dumps([str(project_dir()), target, name, dict(vars or {}), dict(connection or {})], sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def _copy_atomic(src: Path, dest: Path, *, keep_mtime: bool) -> None:
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.tmp")
    try:
        (shutil.copy2 if keep_mtime else shutil.copyfile)(src, tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def seed_parse(dbt_target: Path, key: str) -> bool:
    """Put the cached parse of ``key`` into ``dbt_target`` when the target holds none, the parse
    of another key (other run settings) or an older one of this key; True when it did."""
    entry = cache_dir() / f"{key}.msgpack"
    own = dbt_target / _PARSE_FILE
    try:
        if not entry.is_file():
            return False
        if own.exists() and _own_key(dbt_target) == key and own.stat().st_mtime >= entry.stat().st_mtime:
            return False
        dbt_target.mkdir(parents=True, exist_ok=True)
        _copy_atomic(entry, own, keep_mtime=False)
        (dbt_target / _KEY_FILE).write_text(key, encoding="utf-8")
        return True
    except OSError:
        return False


def _own_key(dbt_target: Path) -> str | None:
    try:
        return (dbt_target / _KEY_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def keep_parse(dbt_target: Path, key: str) -> None:
    """Keep the parse dbt left in ``dbt_target`` as the newest of ``key`` (after a run), and drop
    the oldest entries beyond the cache's size."""
    own = dbt_target / _PARSE_FILE
    folder = cache_dir()
    try:
        if not own.is_file():
            return
        (dbt_target / _KEY_FILE).write_text(key, encoding="utf-8")  # what dbt left is the parse of key
        entry = folder / f"{key}.msgpack"
        mine = own.stat()
        kept = entry.stat() if entry.is_file() else None
        if kept is not None and (kept.st_mtime, kept.st_size) == (mine.st_mtime, mine.st_size):
            return  # dbt did not parse again: the entry is this parse already
        folder.mkdir(parents=True, exist_ok=True)
        _copy_atomic(own, entry, keep_mtime=True)  # same age as the store's: not seeded back
        entries = sorted(folder.glob("*.msgpack"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[_KEPT:]:
            old.unlink(missing_ok=True)
    except OSError:
        return
