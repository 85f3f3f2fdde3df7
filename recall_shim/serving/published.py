"""A store's published snapshots: which are ready to serve (marker written), pruning all but the
newest few (keeping the layers they read and the newest index), and the serving index written
after a publish (recall_shim/serving/index_build.py, term postings). Used by the build
(targets/duckdb.py), forget's re-publish and the reader."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import duckdb

from recall_shim.common.paths import StorePaths
from recall_shim.forget.journal import prune_temp_files
from recall_shim.serving.index import index_dir
from recall_shim.serving.index_build import build_index
from recall_shim.serving.snapshot import snapshot_layers
from recall_shim.serving.terms import build_term_postings

__all__ = ["prune_snapshots", "ready_snapshots", "update_index"]


def ready_snapshots(paths: StorePaths) -> list[Path]:
    """Published snapshots (their .ready marker exists), oldest first."""
    if not paths.serving.is_dir():
        return []
    prefix, marker = paths.layout.snapshot_prefix, paths.layout.ready
    names = sorted(n for n in os.listdir(paths.serving) if n.startswith(prefix) and n.endswith(marker))
    out = []
    for n in names:
        db = paths.serving / (n[: -len(marker)] + ".duckdb")
        if db.exists():
            out.append(db)
    return out


def prune_snapshots(paths: StorePaths, keep: int = 3) -> int:
    """Delete all but the newest ``keep`` published snapshots, except files a kept snapshot reads
    as a layer (kept with their .ready marker), and stray unpublished files older than the newest
    published one. Index folders go with their snapshot, and those of snapshots kept only as a
    layer too, except the newest index (the next build's index update reads it as "previous").
    Open readers keep reading an unlinked file until they close."""
    prefix, marker = paths.layout.snapshot_prefix, paths.layout.ready
    ready = ready_snapshots(paths)
    kept = ready[max(0, len(ready) - keep):]
    needed = {db.name for db in kept}
    for db in kept:
        try:
            needed.update(snapshot_layers(db))
        except duckdb.Error:
            pass  # unreadable: nothing more to keep for it
    removed = 0
    for db in ready:
        if db.name in needed:
            continue
        for p in (db.with_suffix(marker), db, db.with_suffix(".duckdb.wal")):
            try:
                p.unlink()
                removed += 1
            except FileNotFoundError:
                pass
    if ready:
        newest = ready[-1].name
        for n in os.listdir(paths.serving):
            if n.startswith(prefix) and n.endswith(".duckdb") and n < newest and not (paths.serving / n).with_suffix(marker).exists():
                (paths.serving / n).unlink(missing_ok=True)
                removed += 1
    # index folders of snapshots that are gone or kept only as a layer (except the newest index),
    # and temporary ones a killed builder left behind (builds hold the build lock, so no index is
    # being written while this runs)
    served = {db.name for db in kept}
    indexes = sorted(n for n in os.listdir(paths.serving)
                     if n.startswith(prefix) and n.endswith(".index") and (paths.serving / n / "meta.json").exists())
    newest_index = indexes[-1] if indexes else None
    for n in os.listdir(paths.serving):
        p = paths.serving / n
        if n.startswith(prefix) and ".index" in n and p.is_dir():
            snap = paths.serving / (n.split(".index", 1)[0] + ".duckdb")
            if not n.endswith(".index") or not snap.exists() or (snap.name not in served and n != newest_index):
                shutil.rmtree(p, ignore_errors=True)
                removed += 1
    # temporary and WAL files of dead writers (callers hold the build lock)
    return removed + prune_temp_files(paths)


def update_index(paths: StorePaths, snapshot: Path) -> tuple[dict[str, Any] | None, str]:
    """Build ``snapshot``'s serving index from the newest older index (incrementally where it
    can). A failure is reported, not raised: the snapshot is then served by its compiled statement."""
    older = [s for s in ready_snapshots(paths) if s.name < snapshot.name and (index_dir(s) / "meta.json").exists()]
    try:
        previous = index_dir(older[-1]) if older else None
        stats = build_index(snapshot, previous)
        # the hybrid fusion's lexical leg: the unchanged memories' postings from the previous folder
        stats["term_postings"] = build_term_postings(snapshot, previous)
    except Exception as exc:  # noqa: BLE001 - serving falls back to the compiled statement
        return None, f"\nserving index not built for {snapshot.name}: {exc!r}\n"
    return stats, f"\nserving index for {snapshot.name}: {stats}\n"
