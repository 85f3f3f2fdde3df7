"""File locks that order writers, builds and forget (flock: released when the process dies).

* ``<stem>.build.lock`` exclusive: one ``dbt build`` or one ``forget`` at a time.
* ``<stem>.inbox/.write.lock``: every writer holds it *shared* from stamping ``landed_at`` until
  its landing file is renamed into place, so writers never wait for each other; ``forget`` holds
  it *exclusively* while it stamps ``forgotten_at`` and rewrites landing files. Hence every row
  landed at or before ``forgotten_at`` is in a file that forget rewrites, and every row landed
  later is stamped later.
"""

from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def file_lock(path: Path, *, exclusive: bool) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
