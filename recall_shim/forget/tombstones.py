"""Forget tombstones: ids only, never content (docs/data_protection.md). Written by forget on
both targets (recall_shim/forget/duckdb.py, recall_shim/targets/postgres/forget.py) and read by every build
(models/staging/landing/stg_forget_requests.sql).

Scopes: 'user' (every row of user_id landed up to forgotten_at), 'memory' (memory_id of user_id,
forever) and 'message' ((user_id, message_id), forever: a replayed row is dropped at the build).
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable

TOMBSTONE_FIELDS = ("tombstone_id", "scope", "user_id", "memory_id", "message_id", "forgotten_at")


def _tombstone(scope: str, user_id: str | None, memory_id: str | None, message_id: str | None,
               forgotten_at: str) -> dict[str, Any]:
    return {"tombstone_id": uuid.uuid4().hex, "scope": scope, "user_id": user_id, "memory_id": memory_id,
            "message_id": message_id, "forgotten_at": forgotten_at}


def message_tombstones(user_id: str | None, message_ids: Iterable[str], forgotten_at: str) -> list[dict[str, Any]]:
    """One 'message' tombstone per (user_id, message_id)."""
    if user_id is None:
        return []
    return [_tombstone("message", user_id, None, mid, forgotten_at) for mid in sorted(set(message_ids))]


def tombstones(scope: str, user_id: str | None, memory_id: str | None, memory_ids: Iterable[str],
               message_ids: Iterable[str], forgotten_at: str) -> list[dict[str, Any]]:
    """The tombstones of one forget: the user or the memory asked for, every other memory
    forgotten with it (memory scope: e.g. the episode of the same message), and every message
    removed (both scopes), so that no derived memory and no replayed message comes back."""
    first = _tombstone(scope, user_id, memory_id, None, forgotten_at)
    others = [] if scope == "user" else [
        _tombstone("memory", user_id, mid, None, forgotten_at) for mid in sorted(set(memory_ids) - {memory_id})]
    return [first, *others, *message_tombstones(user_id, message_ids, forgotten_at)]
