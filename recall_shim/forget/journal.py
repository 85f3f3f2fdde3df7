"""The forget journal and the store's temporary files (docs/data_protection.md, "Failures").

A forget first writes its intent to ``<stem>.forget-journal.json`` (ids only, like the tombstone),
then runs its steps, recording each one done in the journal; the audit line is appended once,
at completion, and then the journal is removed. An interrupted forget (kill -9, disk full) is
completed by the next forget, build or store open. While a journal exists, readers serve none of
its ids (``pending_forget``), so the snapshots stop serving forgotten data before any file is
purged, not only once the purged snapshot is published.

Every file written here goes to a temporary name beside its target and is renamed into place;
a failed write removes its temporary file and raises StorageFailure.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

import duckdb

from recall_shim.common.durable import fsync_dir
from recall_shim.errors import StorageFailure
from recall_shim.common.locks import try_file_lock
from recall_shim.common.paths import StorePaths

JOURNAL_VERSION = 1
# Temporary files older than this are pruned at build time (and only under the store's locks,
# so no live writer owns them).
STALE_TEMP_SECONDS = 600.0
FORGET_TMP = ".forget-tmp"


@contextlib.contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Turn the file system's refusal (OSError, DuckDB's I/O error) into StorageFailure."""
    try:
        yield
    except OSError as exc:
        raise StorageFailure(f"{what}: {exc.strerror or exc}") from None
    except (duckdb.IOException, duckdb.FatalException) as exc:
        raise StorageFailure(f"{what}: {exc}") from None


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it (fsynced, renamed)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with storage_errors(f"cannot write {path}"):
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


# --- the journal -----------------------------------------------------------------------------

def load_journal(paths: StorePaths) -> dict[str, Any] | None:
    try:
        data = paths.forget_journal.read_bytes()
    except FileNotFoundError:
        return None
    journal = json.loads(data)
    if not isinstance(journal, dict) or journal.get("version") != JOURNAL_VERSION:
        raise StorageFailure(f"{paths.forget_journal} is not a forget journal this version can complete")
    return journal


def save_journal(paths: StorePaths, journal: dict[str, Any]) -> None:
    journal["version"] = JOURNAL_VERSION
    write_atomic(paths.forget_journal, json.dumps(journal, ensure_ascii=True, sort_keys=True).encode("ascii"))


def clear_journal(paths: StorePaths) -> None:
    with storage_errors(f"cannot remove {paths.forget_journal}"):
        paths.forget_journal.unlink(missing_ok=True)
        fsync_dir(paths.forget_journal.parent)


_pending_cache: dict[Path, tuple[tuple[int, int], tuple[frozenset[str], frozenset[str]]]] = {}


def pending_forget(paths: StorePaths) -> tuple[frozenset[str], frozenset[str]]:
    """(users, memory ids) of a forget in progress, which readers must not serve; empty sets
    when no forget is pending. One stat per call; the journal is read when it changes."""
    try:
        st = paths.forget_journal.stat()
    except FileNotFoundError:
        return frozenset(), frozenset()
    key = (st.st_mtime_ns, st.st_size)
    cached = _pending_cache.get(paths.forget_journal)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        journal = load_journal(paths) or {}
    except (ValueError, StorageFailure):  # written atomically, so only a journal of another version
        journal = {}
    users = frozenset([journal["user_id"]] if journal.get("scope") == "user" and journal.get("user_id") else [])
    value = (users, frozenset(journal.get("memory_ids") or []))
    _pending_cache[paths.forget_journal] = (key, value)
    return value


# --- the audit log ---------------------------------------------------------------------------

def append_audit_once(path: Path, record: dict[str, Any]) -> None:
    """Append ``record`` unless a line with its audit_id is there already (a forget resumed
    after its audit line was written). A torn last line (a write the disk refused halfway) is
    cut off first: it never was a completed record."""
    line = (json.dumps(record, ensure_ascii=True, sort_keys=True) + "\n").encode("ascii")
    with storage_errors(f"cannot append to the audit log {path}"):
        with open(path, "a+b") as fh:
            fh.seek(0)
            data = fh.read()
            if data and not data.endswith(b"\n"):
                fh.truncate(data.rfind(b"\n") + 1)
            needle = f'"audit_id": "{record["audit_id"]}"'.encode("ascii")
            if any(needle in existing for existing in data.splitlines(keepends=True) if existing.endswith(b"\n")):
                return
            fh.seek(0, os.SEEK_END)
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


# --- temporary files -------------------------------------------------------------------------

def _serving_temp(name: str) -> bool:
    # hidden files (forget's work copies and compaction copies, journal/marker temps), and WAL
    # files: a published snapshot is never written again, so a .wal there is a dead writer's
    return name.startswith(".") or name.endswith((".wal", ".tmp"))


def _landing_temp(name: str, write_lock: str) -> bool:
    return name.startswith(".") and ".tmp" in name and name != write_lock


def prune_temp_files(paths: StorePaths, min_age: float = STALE_TEMP_SECONDS) -> int:
    """Remove temporary files left by dead writers: forget's copies beside the warehouse, the
    serving folder's temporary and WAL files, and landing files never renamed into place, each
    only if older than ``min_age`` seconds. The caller holds the build lock (no build or forget
    writes meanwhile); landing temporaries are only removed when the write lock can be taken
    exclusively at once (no writer is landing)."""
    now = time.time()
    removed = 0

    def drop(p: Path) -> None:
        nonlocal removed
        try:
            if now - p.lstat().st_mtime < min_age or not p.is_file():
                return
            p.unlink()
            removed += 1
        except FileNotFoundError:
            pass

    prefix = f".{paths.db.name}."
    if paths.db.parent.is_dir():
        for n in os.listdir(paths.db.parent):
            if n.startswith(prefix) and FORGET_TMP in n:
                drop(paths.db.parent / n)
            elif n == f".{paths.forget_journal.name}.tmp":
                drop(paths.db.parent / n)
    if paths.serving.is_dir():
        for n in os.listdir(paths.serving):
            if _serving_temp(n):
                drop(paths.serving / n)
    with try_file_lock(paths.write_lock, exclusive=True) as idle:
        if idle:
            for folder in (paths.messages, paths.access, paths.forget):
                if folder.is_dir():
                    for n in os.listdir(folder):
                        if _landing_temp(n, paths.write_lock.name):
                            drop(folder / n)
    return removed
