"""The hot tail's files and row shapes (recall_shim/serving/tail.py): which landing files the
newest build covered, reading landed files, and the arrow schemas of the tail's relations."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import duckdb
import pyarrow as pa

from recall_shim.common.paths import StorePaths

TEXT_FIELDS = ("landing_id", "user_id", "session_id", "agent_id", "msg_seq", "role", "content", "ts",
               "message_id", "landed_at", "door_reason")
MEMORY_COLUMNS = ("user_id", "memory_id", "kind", "content", "embedding", "strength", "source_message_ids",
                  "valid_to", "is_question", "agent_ids", "session_ids", "created_at", "happened_on", "happened_grain",
                  "turn_session_id", "turn_seq", "slot")
COVERED_RECORD = "tail_covered.json"  # in <stem>.serving/ (a forget clears <stem>.dbt/, not this)


def jsonl_names(folder: Path) -> list[str]:
    """Names of the landed files of a landing folder (written whole: a temporary file starts with a dot)."""
    try:
        return sorted(n for n in os.listdir(folder) if n.endswith(".jsonl") and not n.startswith("."))
    except FileNotFoundError:
        return []


def landed_message_files(paths: StorePaths) -> list[str]:
    """Names of the landed message files."""
    return jsonl_names(paths.messages)


def record_covered(paths: StorePaths, snapshot: Path, files: Sequence[str]) -> None:
    """Record that ``snapshot``'s build loaded ``files`` (caller holds the build lock)."""
    path = paths.serving / COVERED_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"snapshot": snapshot.name, "files": sorted(files)}), encoding="utf-8")
    os.replace(tmp, path)


def covered_files(paths: StorePaths, snapshot: Path | None) -> frozenset[str]:
    """The landing files the newest build loaded: its record. Without a record (a store built by
    plain ``dbt build``) the files written before ``snapshot`` was marked ready count as covered
    (a file landed during that build shows only after the next one)."""
    try:
        record = json.loads((paths.serving / COVERED_RECORD).read_text(encoding="utf-8"))
        return frozenset(str(f) for f in record["files"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if snapshot is None:
        return frozenset()
    try:
        ready = snapshot.with_suffix(paths.layout.ready).stat().st_mtime
    except FileNotFoundError:
        return frozenset()
    cut = datetime.fromtimestamp(ready, timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    return frozenset(n for n in landed_message_files(paths) if n < cut)


@dataclass
class Tombstones:
    """What the forget tombstones (``<stem>.inbox/forget/``) remove from the landed rows."""

    users: dict[str, str] = field(default_factory=dict)  # user -> forgotten_at
    messages: set[tuple[str, str]] = field(default_factory=set)  # (user, message_id)
    memories: set[str] = field(default_factory=set)

    def read(self, folder: Path, names: Sequence[str]) -> None:
        for name in names:
            for t in read_jsonl(folder / name):
                user, at = t.get("user_id"), str(t.get("forgotten_at") or "")
                if t.get("scope") == "user" and isinstance(user, str):
                    self.users[user] = max(at, self.users.get(user, ""))
                elif t.get("scope") == "memory" and isinstance(t.get("memory_id"), str):
                    self.memories.add(t["memory_id"])
                elif t.get("scope") == "message" and isinstance(user, str) and isinstance(t.get("message_id"), str):
                    self.messages.add((user, t["message_id"].strip()))

    def forgets(self, row: dict[str, Any]) -> bool:
        """Whether a landed row is forgotten (its user after it landed, or the message)."""
        user = row["user_id"]
        at = self.users.get(user)
        if at is not None and str(row.get("landed_at") or "") <= at:
            return True
        return (user, str(row.get("message_id") or "").strip()) in self.messages


def file_stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:  # removed by a forget meanwhile
        return []
    out = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def landed_row(rec: dict[str, Any], landing_file: str) -> dict[str, Any]:
    row = {k: (None if rec.get(k) is None else str(rec[k])) for k in TEXT_FIELDS}
    row["is_invalid_utf8"] = bool(rec.get("content_invalid_utf8") or False)
    try:
        row["landing_seq"] = int(rec.get("landing_seq") or 0)
    except (TypeError, ValueError):
        row["landing_seq"] = 0
    row["landing_file"] = landing_file
    row["loaded_at"] = None
    return row


LANDED_SCHEMA = pa.schema([*(pa.field(k, pa.string()) for k in TEXT_FIELDS), pa.field("is_invalid_utf8", pa.bool_()),
                            pa.field("landing_seq", pa.int64()), pa.field("landing_file", pa.string()),
                            pa.field("loaded_at", pa.timestamp("us"))])
ROW_SCHEMA = pa.schema([*(pa.field(k, pa.string()) for k in ("landing_id", "user_id", "session_id", "agent_id")),
                         pa.field("msg_seq", pa.int64()), pa.field("role", pa.string()), pa.field("content", pa.string()),
                         pa.field("message_at", pa.timestamp("us")), pa.field("message_id", pa.string()),
                         pa.field("landed_at", pa.timestamp("us")), pa.field("landing_file", pa.string()),
                         pa.field("landing_seq", pa.int64())])
EXTRACTION_SCHEMA = pa.schema([*(pa.field(k, pa.string()) for k in ("message_id", "user_id", "kind", "slot", "content")),
                                pa.field("happened_on", pa.date32()), pa.field("happened_grain", pa.string()),
                                pa.field("message_at", pa.timestamp("us")), pa.field("loaded_at", pa.timestamp("us"))])
MEMORY_SCHEMA = pa.schema([pa.field("user_id", pa.string()), pa.field("memory_id", pa.string()),
                            pa.field("kind", pa.string()), pa.field("content", pa.string()),
                            pa.field("embedding", pa.list_(pa.float32())), pa.field("strength", pa.float64()),
                            pa.field("source_message_ids", pa.list_(pa.string())),
                            pa.field("valid_to", pa.timestamp("us")), pa.field("is_question", pa.bool_()),
                            pa.field("agent_ids", pa.list_(pa.string())), pa.field("session_ids", pa.list_(pa.string())),
                            pa.field("created_at", pa.timestamp("us")), pa.field("happened_on", pa.date32()),
                            pa.field("happened_grain", pa.string()), pa.field("turn_session_id", pa.string()),
                            pa.field("turn_seq", pa.int64()), pa.field("slot", pa.string())])
CANDIDATE_SCHEMA = pa.schema([pa.field("memory_id", pa.string()), pa.field("user_id", pa.string()),
                              pa.field("kind", pa.string()), pa.field("slot", pa.string()),
                              pa.field("created_at", pa.timestamp("us")), pa.field("embedding", pa.list_(pa.float32()))])
LINK_SCHEMA = pa.schema([pa.field("memory_id", pa.string()), pa.field("user_id", pa.string()),
                          pa.field("kind", pa.string()), pa.field("valid_to", pa.timestamp("us")),
                          pa.field("turn_session_id", pa.string()), pa.field("turn_seq", pa.int64())])
TERM_SCHEMA = pa.schema([pa.field("memory_id", pa.string()), pa.field("user_id", pa.string()),
                          pa.field("term", pa.string()), pa.field("tf", pa.int64()), pa.field("doc_len", pa.int64())])
