"""Writers land immutable JSONL files; dbt loads them. Nothing here opens the DuckDB file, so any
number of writer processes run while a build or a recall holds the database.

A landing file is written to a temporary name, fsynced, then renamed into place (and the folder
fsynced): a reader sees a whole file or none, and a write is acknowledged only once durable.
Every value is written as text with ``ensure_ascii`` JSON, so any byte sequence survives the trip:
invalid UTF-8 in any field of an input file is replaced with U+FFFD and flagged
(``content_invalid_utf8``), and staging rejects the row.
"""

from __future__ import annotations

import csv
import json
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from ._errors import InvalidInput

MESSAGE_FIELDS = ("user_id", "session_id", "agent_id", "msg_seq", "role", "content", "ts", "message_id")


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value.isoformat(sep=" ")
    if isinstance(value, float) and value != value:  # NaN from pandas-style inputs
        return None
    return str(value)


def _clean(value: str) -> tuple[str, bool]:
    """(valid UTF-8 text, whether it had to be repaired). Undecodable bytes become U+FFFD."""
    try:
        value.encode("utf-8")
        return value, False
    except UnicodeEncodeError:
        pass
    try:
        raw = value.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:  # lone surrogates from JSON escapes
        raw = value.encode("utf-8", errors="replace")
    return raw.decode("utf-8", errors="replace"), True


def message_record(row: Mapping[str, Any], landed_at: str, landing_seq: int = 0) -> dict[str, Any]:
    """Normalise one input row to the landing schema (all text) without judging it.
    ``landing_seq`` is the row's position in its landing file: of two rows of one user with the
    same message_id, staging keeps the first (landing order, then this position)."""
    record: dict[str, Any] = {"landing_id": uuid.uuid4().hex, "landed_at": landed_at,
                              "landing_seq": str(landing_seq)}
    invalid = bool(row.get("content_invalid_utf8", False))
    for field in MESSAGE_FIELDS:
        value = row.get(field)
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="surrogateescape")
        text = _text(value)
        if text is not None:
            text, repaired = _clean(text)
            invalid = invalid or repaired  # any field: an id must never change silently
        record[field] = text
    record["content_invalid_utf8"] = invalid
    return record


def write_landing_file(folder: Path, records: list[dict[str, Any]]) -> Path | None:
    """Atomically write ``records`` as one JSONL file in ``folder``; returns its path."""
    if not records:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:12]}.jsonl"
    tmp = folder / f".{name}.tmp"
    data = "".join(json.dumps(r, ensure_ascii=True, allow_nan=False) + "\n" for r in records)
    with open(tmp, "w", encoding="ascii") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    final = folder / name
    os.rename(tmp, final)
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return final


# --- reading input files --------------------------------------------------------------------

def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    # surrogateescape keeps invalid bytes as lone surrogates; message_record flags them.
    with open(path, "r", encoding="utf-8", errors="surrogateescape", newline="\n") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError:
                obj = None
            if not isinstance(obj, dict):
                # Unreadable line: keep it as a row whose content is the raw line; staging rejects
                # it (no user), so it lands in the rejects relation instead of vanishing.
                obj = {"content": raw.rstrip("\n")}
            yield obj


def _read_csv(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "r", encoding="utf-8", errors="surrogateescape", newline="") as fh:
        for row in csv.DictReader(fh):
            yield {k: (v if v != "" else None) for k, v in row.items() if k is not None}


def _read_parquet(path: Path) -> Iterator[dict[str, Any]]:
    import duckdb

    con = duckdb.connect()
    try:
        rel = con.read_parquet(str(path))
        cols = rel.columns
        missing = [c for c in ("user_id", "content") if c not in cols]
        if missing:
            raise InvalidInput(f"{path}: parquet file lacks columns {missing}")
        for values in rel.fetchall():
            yield dict(zip(cols, values))
    finally:
        con.close()


def read_input_file(path: str | Path) -> Iterable[dict[str, Any]]:
    """Rows of a CSV, JSONL or Parquet file with the session-log columns."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInput(f"no such file: {p}")
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return _read_jsonl(p)
    if suffix == ".csv":
        return _read_csv(p)
    if suffix == ".parquet":
        return _read_parquet(p)
    raise InvalidInput(f"{p}: unsupported file type {suffix!r} (use .csv, .jsonl or .parquet)")
