"""fsync helpers: what makes a written file or a rename survive a crash (a file's data, then the
folder that names it)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_dir", "fsync_files", "fsync_path"]


def fsync_path(path: Path) -> None:
    """fsync one file or folder by path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """fsync a folder: the names renamed into it or removed from it are durable."""
    fsync_path(folder)


def fsync_files(folder: Path) -> None:
    """fsync every entry of ``folder`` (a freshly written index folder before its rename)."""
    for p in folder.iterdir():
        fsync_path(p)
