"""Writers land immutable JSONL files; dbt loads them. Nothing here opens the DuckDB file, so any
number of writer processes run while a build or a recall holds the database.

A landing file is written to a temporary name, fsynced, then renamed into place (and the folder
fsynced): a reader sees a whole file or none, and a write is acknowledged only once durable.
Every value is written as text with ``ensure_ascii`` JSON, so any byte sequence survives the trip:
invalid UTF-8 in any field of an input file is replaced with U+FFFD and flagged
(``content_invalid_utf8``), and staging rejects the row. What a row may be is checked before it
lands, at the door (recall_shim/write/door.py).
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from recall_shim.write.door import UnreadableLine
from recall_shim.errors import InvalidInput
from recall_shim.common.sql import glob_escape

def utc_now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def write_landing_file(folder: Path, records: list[dict[str, Any]]) -> Path | None:
    """Atomically write ``records`` as one JSONL file in ``folder``; returns its path."""
    if not records:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:12]}.jsonl"
    tmp = folder / f".{name}.tmp"
    data = "".join(json.dumps(r, ensure_ascii=True, allow_nan=False) + "\n" for r in records)
    final = folder / name
    try:
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.rename(tmp, final)
    except BaseException:  # e.g. disk full: no partial file stays behind (nothing was acknowledged)
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return final


# --- reading input files --------------------------------------------------------------------

REQUIRED_COLUMNS = ("user_id", "content")
CSV_DELIMITERS = (",", ";", "\t", "|")
_CSV_FIELD_LIMIT = 2**31 - 1  # a huge field is the door's to refuse (content_too_long), not csv's


def _column(name: str) -> str:
    """A header / key as the session-log column it names: BOM, quotes, spaces and case removed."""
    return name.lstrip("\ufeff").strip().strip('"').strip().lower()


def _refuse_columns(path: Path, seen: Iterable[str]) -> None:
    names = sorted(set(seen))
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise InvalidInput(f"{path}: no {' or '.join(missing)} column (found {names[:20]}); nothing was landed. "
                           "Session-log files need user_id and content (docs/data_protection.md)")


def _read_jsonl(path: Path) -> Iterator[dict[str, Any] | UnreadableLine]:
    """Every line of a JSON-lines file: an object (keys normalised like CSV headers) or, for a
    line that is not a JSON object (bad JSON, a 4,300-digit integer, 100k levels of nesting, an
    array), an UnreadableLine that lands as a reject. A file in which no object has user_id or
    none has content is refused whole."""
    rows: list[dict[str, Any] | UnreadableLine] = []
    keys: set[str] = set()
    # utf-8-sig drops a BOM; surrogateescape keeps invalid bytes as lone surrogates (flagged later)
    with open(path, "r", encoding="utf-8-sig", errors="surrogateescape", newline="\n") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (ValueError, RecursionError):  # JSONDecodeError, int digit limit, nesting depth
                obj = None
            if not isinstance(obj, dict):
                rows.append(UnreadableLine("invalid_json", raw.rstrip("\n")))
                continue
            row: dict[str, Any] = {}
            for k, v in obj.items():
                row.setdefault(_column(k), v)
            keys.update(row)
            rows.append(row)
    if len(rows) > sum(isinstance(r, UnreadableLine) for r in rows):
        _refuse_columns(path, keys)
    yield from rows


def _csv_dialect(path: Path, header: str) -> tuple[str, bool]:
    """(delimiter, skipinitialspace): the delimiter whose split of the header line names both
    user_id and content; ", " separators are read with skipinitialspace."""
    for d in CSV_DELIMITERS:
        names = header.split(d)
        if all(c in {_column(n) for n in names} for c in REQUIRED_COLUMNS):
            return d, any(n[:1].isspace() for n in names[1:])
    _refuse_columns(path, (_column(n) for n in header.split(",")))
    raise AssertionError("unreachable")


def _read_csv(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a CSV file from ordinary tools: a BOM, any header case, ", " separators and the
    delimiters , ; tab | are read correctly. A row whose field count differs from the header's
    (an unterminated quote, an unquoted delimiter) or any quoting error refuses the whole file
    with the line number: after it, row boundaries cannot be trusted."""
    text = path.read_bytes().decode("utf-8", errors="surrogateescape").lstrip("\ufeff")
    header_line = text.split("\n", 1)[0].rstrip("\r")
    delimiter, initial_space = _csv_dialect(path, header_line)
    csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, skipinitialspace=initial_space,
                        strict=True)
    rows: list[dict[str, Any]] = []
    try:
        header = [_column(h) for h in next(reader)]
        dupes = sorted({h for h in header if header.count(h) > 1 and h})
        if dupes:
            raise InvalidInput(f"{path}: the header names {dupes} more than once; nothing was landed")
        for fields in reader:
            if not fields or fields == [""]:
                continue
            if len(fields) != len(header):
                raise InvalidInput(
                    f"{path}: line {reader.line_num}: {len(fields)} fields, the header has {len(header)} "
                    "(an unterminated quote or an unquoted delimiter in a value?); nothing was landed")
            rows.append({k: (v if v != "" else None) for k, v in zip(header, fields) if k})
    except csv.Error as exc:
        raise InvalidInput(f"{path}: line {reader.line_num}: malformed CSV ({exc}); nothing was landed") from None
    yield from rows


def _read_parquet(path: Path) -> Iterator[dict[str, Any]]:
    import duckdb

    con = duckdb.connect()
    try:
        rel = con.read_parquet(glob_escape(path))  # read_parquet expands globs: match this file only
        cols = [_column(c) for c in rel.columns]
        _refuse_columns(path, cols)
        for values in rel.fetchall():
            yield dict(zip(cols, values))
    finally:
        con.close()


def read_input_file(path: str | Path) -> Iterable[dict[str, Any] | UnreadableLine]:
    """Rows of a CSV, JSONL or Parquet file with the session-log columns (see the readers for
    what refuses a whole file with InvalidInput: then nothing of it lands)."""
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


def message_row(user_id: Any, content: Any, *, role: Any = "user", session_id: Any = "default",
                msg_seq: Any = None, ts: Any = None, message_id: Any = None, agent_id: Any = None) -> dict[str, Any]:
    """The session-log row of one ``remember`` call, with its defaults (shared by both stores).
    Empty content is refused here, on every path that remembers one message (API, CLI, HTTP, MCP,
    LangGraph): InvalidInput, nothing lands. Rows of files and batches are judged by the build
    (session_log_rejects, ``empty_content``)."""
    if content is None or (isinstance(content, str) and not content.strip()):
        raise InvalidInput("content must not be empty")
    return {"user_id": user_id, "session_id": session_id, "agent_id": agent_id,
            "msg_seq": msg_seq if msg_seq is not None else time.time_ns() // 1000, "role": role,
            "content": content, "ts": ts or utc_now_iso(),
            "message_id": f"msg_{uuid.uuid4().hex}" if message_id is None else message_id}
