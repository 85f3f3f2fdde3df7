"""The door: every session-log row a writer hands over (remember, remember_many, ingest, HTTP,
MCP; DuckDB and PostgreSQL) is checked here before it lands, so one hostile row can neither break
a build nor hide as another user.

Checked at the door: the id rule (recall_shim/write/ids.py) for user_id / session_id / agent_id /
message_id, the JSON types of the other fields, and ``content`` at most var ``max_content_chars``
characters. Everything else (roles, timestamps, blank content, duplicates) is judged by staging
(int_messages_validated), as before; only a single ``remember`` refuses blank content at once
(``message_row`` in recall_shim/write/landing.py).

A refused row either raises (``admit_strict``: remember, remember_many) or lands with its
``door_reason`` (``admit``: input files), so it reaches session_log_rejects with that reason,
its offending value rendered printable and its content cut to the limit (never the full 34 MB).
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, timezone
from typing import Any, Iterable, Mapping

from recall_shim.errors import ContentTooLong, InvalidId, InvalidInput
from recall_shim.write.ids import ID_FIELDS, normalise_id, visible_text
from recall_shim.write.limits import DoorLimits

MESSAGE_FIELDS = ("user_id", "session_id", "agent_id", "msg_seq", "role", "content", "ts", "message_id")


class UnreadableLine:
    """A line of an input file that is not a JSON object (bad JSON, a 4,300-digit integer, 100k
    levels of nesting, an array): it lands as a reject with ``reason`` and the line as content."""

    def __init__(self, reason: str, text: str) -> None:
        self.reason = reason
        self.text = text


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


def _timestamp(value: Any) -> str | None:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return value if isinstance(value, str) else None


def _msg_seq(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():  # pandas-style integer columns with gaps
        return str(int(value))
    return value if isinstance(value, str) else None


class _Verdict:
    def __init__(self) -> None:
        self.reason: str | None = None
        self.message = ""
        self.repaired: list[str] = []  # fields whose text was not valid UTF-8 / Unicode

    def refuse(self, reason: str, message: str) -> None:
        if self.reason is None:
            self.reason, self.message = reason, message


def _field(field: str, value: Any, limits: DoorLimits, verdict: _Verdict) -> str | None:
    """One field as landing text, refusing it on ``verdict`` when it breaks a door rule."""
    bounded = max(limits.max_id_chars, 64) * 2
    if field in ID_FIELDS:
        if field in verdict.repaired:
            return value  # repaired text (U+FFFD): staging rejects the row as invalid_utf8
        try:
            return normalise_id(value, field, max_chars=limits.max_id_chars)
        except InvalidId as exc:
            verdict.refuse(exc.reason, str(exc))
            return visible_text(value, bounded)
    if field == "content":
        if not isinstance(value, str):
            verdict.refuse("invalid_content", f"content must be a string, got {type(value).__name__}")
            return visible_text(value, limits.max_content_chars)
        if len(value) > limits.max_content_chars:
            verdict.refuse("content_too_long", f"content has {len(value)} characters; the limit is "
                           f"{limits.max_content_chars} (var max_content_chars)")
            return value[:limits.max_content_chars]
        return value
    text = {"msg_seq": _msg_seq, "ts": _timestamp}.get(field, lambda v: v if isinstance(v, str) else None)(value)
    if text is None:
        reason = {"msg_seq": "invalid_msg_seq", "ts": "invalid_timestamp", "role": "unknown_role"}[field]
        verdict.refuse(reason, f"{field} must be {'an integer' if field == 'msg_seq' else 'a string'}, "
                       f"got {type(value).__name__}")
        return visible_text(value, bounded)
    return text


def _judge(row: Mapping[str, Any] | UnreadableLine, landed_at: str,
           limits: DoorLimits, seq: int) -> tuple[dict[str, Any], _Verdict]:
    verdict = _Verdict()
    if isinstance(row, UnreadableLine):
        verdict.refuse(row.reason, "the line is not a JSON object")
        row = {"content": row.text[:limits.max_content_chars]}
    # landing_seq: the row's position in its landing file; of two rows of one user with the same
    # message_id, staging keeps the first (landing order, then this position)
    record: dict[str, Any] = {"landing_id": uuid.uuid4().hex, "landed_at": landed_at, "landing_seq": str(seq)}
    invalid = bool(row.get("content_invalid_utf8", False))
    for field in MESSAGE_FIELDS:
        value = row.get(field)
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", errors="surrogateescape")
        if isinstance(value, str):
            value, repaired = _clean(value)
            if repaired:  # any field: an id must never change silently
                invalid = True
                verdict.repaired.append(field)
        if value is None or (isinstance(value, float) and value != value):  # NaN: pandas' null
            record[field] = None
            continue
        record[field] = _field(field, value, limits, verdict)
    record["content_invalid_utf8"] = invalid
    record["door_reason"] = verdict.reason
    return record, verdict


def admit(row: Mapping[str, Any] | UnreadableLine, landed_at: str, limits: DoorLimits,
          seq: int = 0) -> dict[str, Any]:
    """The landing record of one input-file row; a refused row carries its ``door_reason`` and
    lands anyway (it reaches session_log_rejects with that reason)."""
    return _judge(row, landed_at, limits, seq)[0]


def admit_strict(row: Mapping[str, Any], landed_at: str, limits: DoorLimits, where: str = "",
                 seq: int = 0) -> dict[str, Any]:
    """The landing record of one row a caller hands over, or the exception that refuses it:
    ContentTooLong, InvalidId, or InvalidInput for a wrong type or text that is not valid Unicode.
    Missing values (a None user_id, blank content) are staging's to reject, as for files."""
    record, verdict = _judge(row, landed_at, limits, seq)
    if verdict.reason is None and verdict.repaired:
        field = verdict.repaired[0]
        verdict.refuse(f"invalid_{field}" if field in ID_FIELDS else "invalid_utf8",
                       f"{field} is not valid Unicode (a lone surrogate or undecodable bytes)")
    if verdict.reason is None:
        return record
    message = where + verdict.message
    if verdict.reason == "content_too_long":
        raise ContentTooLong(message)
    if verdict.reason.startswith("invalid_") and verdict.reason[len("invalid_"):] in ID_FIELDS:
        raise InvalidId(message, verdict.reason)
    raise InvalidInput(message)


def refusals(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Door reasons -> counts over landing records."""
    out: dict[str, int] = {}
    for r in records:
        if r.get("door_reason"):
            out[r["door_reason"]] = out.get(r["door_reason"], 0) + 1
    return dict(sorted(out.items()))
