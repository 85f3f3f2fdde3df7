"""File locks that order writers, builds and forget (flock: released when the process dies).

* ``<stem>.build.lock`` exclusive: one ``dbt build`` or one ``forget`` at a time.
* ``<stem>.inbox/.write.lock``: every writer holds it *shared* from stamping ``landed_at`` until
  its landing file is renamed into place, so writers never wait for each other; ``forget`` holds
  it *exclusively* while it stamps ``forgotten_at`` and rewrites landing files. Hence every row
  landed at or before ``forgotten_at`` is in a file that forget rewrites, and every row landed
  later is stamped later.

A lock file that cannot be opened (read-only store, disk full) raises StorageFailure.
"""

from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from recall_shim.errors import StorageFailure


def _open(path: Path) -> IO[str]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a+")
    except OSError as exc:
        raise StorageFailure(f"cannot open the lock file {path}: {exc.strerror or exc}") from None


@contextmanager
def file_lock(path: Path, *, exclusive: bool) -> Iterator[None]:
    with _open(path) as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def try_file_lock(path: Path, *, exclusive: bool) -> Iterator[bool]:
    """Like file_lock, without waiting: yields whether the lock was taken (False when another
    process holds it, or the lock file cannot be opened)."""
    try:
        fh = _open(path)
    except StorageFailure:
        yield False
        return
    with fh:
        try:
            fcntl.flock(fh, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
