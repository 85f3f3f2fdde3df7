"""A forget's pass over the landing files (DuckDB target): every session-log and access-event file
is rewritten without the forgotten rows (fsynced temporary copy, atomic replace), and a
writer's stale temporary file is removed. Called by recall_shim/forget/duckdb.py under the
exclusive landing write lock."""

from __future__ import annotations

import json
import os
from typing import Any

from recall_shim.common.paths import StorePaths
from recall_shim.forget.common import ForgetTargets
from recall_shim.common.durable import fsync_dir
from recall_shim.forget.journal import storage_errors

__all__ = ["purge_landing"]


def _user_matches(value: Any, user_id: str) -> bool:
    # the same rule as the warehouse delete (recall_shim/forget/duckdb.py) and macros/data_protection.sql: exact, or equal once spaces
    # are trimmed (rows rejected as invalid_user_id for surrounding spaces go too)
    return isinstance(value, str) and (value == user_id or value.strip(" ") == user_id)


def purge_landing(paths: StorePaths, t: ForgetTargets, forgotten_at: str,
                   housekeeping: dict[str, int]) -> tuple[dict[str, int], set[str]]:
    """Rewrite every landing file without the targets' rows; returns rows removed per folder and
    the message ids among them. Safe to repeat: a user's rows landed after ``forgotten_at`` (the
    user came back after the forget) are kept, so a resumed forget removes what the first run
    would have. Caller holds the exclusive write lock."""
    removed = {"landing:messages": 0, "landing:access": 0}
    message_ids: set[str] = set()

    def later(rec: dict[str, Any], stamp: str) -> bool:
        value = rec.get(stamp)
        return isinstance(value, str) and value > forgotten_at

    def drop_message(rec: dict[str, Any]) -> bool:
        # only rows of the user (a memory's owner): message ids are unique per user, not globally
        if not _user_matches(rec.get("user_id"), t.user_id or ""):
            return False
        if t.scope == "user" and later(rec, "landed_at"):
            return False  # the user came back after the forget
        mid = rec.get("message_id")
        if t.scope == "user":
            if isinstance(mid, str) and mid.strip() and mid.strip() not in t.message_ids:
                t.landed_message_ids.add(mid.strip())
            return True
        return rec.get("landing_id") in t.landing_ids or (isinstance(mid, str) and mid.strip() in t.message_ids)

    def drop_access(rec: dict[str, Any]) -> bool:
        if not _user_matches(rec.get("user_id"), t.user_id or ""):
            return False
        if t.scope == "user":
            return not later(rec, "accessed_at")
        return rec.get("memory_id") in t.memory_ids

    for folder, key, drop in ((paths.messages, "landing:messages", drop_message),
                              (paths.access, "landing:access", drop_access)):
        if not folder.is_dir():
            continue
        changed = False
        for f in sorted(folder.iterdir()):
            if f.name.startswith(".") and ".tmp" in f.name:
                # a writer that died before its rename (never acknowledged, never loaded), or this
                # forget's own copy from an interrupted run
                f.unlink(missing_ok=True)
                housekeeping["landing:stale_tmp_files"] = housekeeping.get("landing:stale_tmp_files", 0) + 1
                changed = True
                continue
            if f.name == paths.layout.empty_marker or not f.name.endswith(".jsonl") or not f.is_file():
                continue
            kept: list[bytes] = []
            dropped = 0
            for line in f.read_bytes().splitlines(keepends=True):
                try:
                    rec = json.loads(line) if line.strip() else None
                except ValueError:
                    rec = None
                if isinstance(rec, dict) and drop(rec):
                    dropped += 1
                    if key == "landing:messages" and isinstance(rec.get("message_id"), str):
                        message_ids.add(rec["message_id"].strip())
                else:
                    kept.append(line)
            if not dropped:
                continue
            removed[key] += dropped
            changed = True
            if kept:
                tmp = folder / f".{f.name}.forget.tmp"
                try:
                    with storage_errors(f"cannot rewrite the landing file {f.name}"):
                        with open(tmp, "wb") as fh:
                            fh.write(b"".join(kept))
                            fh.flush()
                            os.fsync(fh.fileno())
                        os.replace(tmp, f)
                finally:
                    tmp.unlink(missing_ok=True)
            else:
                f.unlink()
        if changed:
            fsync_dir(folder)
    return removed, message_ids
