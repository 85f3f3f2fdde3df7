"""The one id rule, used on every path (CLI, Python API, HTTP, MCP, input files; DuckDB and
PostgreSQL stores) for ``user_id``, ``session_id``, ``agent_id`` and ``message_id``:

* a string; ``session_id`` and ``message_id`` may also be a JSON integer (bot frameworks number
  messages), taken as its decimal text. Booleans, floats, lists, objects are refused; None means
  "not given" and is for the caller to judge;
* normalised to Unicode NFC (a composed and a decomposed "é" are one id);
* not empty, no surrounding whitespace, at most var ``max_user_id_chars`` characters;
* no control (Cc), format (Cf: zero-width space, BOM, bidi overrides), surrogate (Cs),
  unassigned (Cn) or line/paragraph separator (Zl, Zp) characters: ids that look alike are the
  same bytes or are refused. The one exception is a zero-width joiner inside an emoji sequence
  ("👩‍💻") and a zero-width non-joiner between two non-ASCII letters, where they are visible.

Breaking the rule raises :class:`InvalidId` (an InvalidInput and an InvalidQuery) whose
``reason`` is the reject reason of a landed row (``invalid_user_id``, ``invalid_session_id``...).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from recall_shim.errors import InvalidId
from recall_shim.write.limits import door_limits

__all__ = ["normalise_id", "ID_FIELDS", "INTEGER_ID_FIELDS", "visible_text"]

ID_FIELDS = ("user_id", "session_id", "agent_id", "message_id")
INTEGER_ID_FIELDS = frozenset({"session_id", "message_id"})
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"})


def _joiner_ok(value: str, i: int) -> bool:
    """Zero-width (non-)joiners are visible in context only (after RFC 5892's CONTEXTJ): ZWJ
    inside an emoji sequence (👩‍💻), ZWNJ between two non-ASCII letters (Persian, Indic)."""
    if not 0 < i < len(value) - 1:
        return False
    before, after = value[i - 1], value[i + 1]
    if value[i] == "\u200d":
        return unicodedata.category(after) == "So" and (unicodedata.category(before) in ("So", "Sk")
                                                         or before == "\ufe0f")
    return all(not c.isascii() and unicodedata.category(c).startswith("L") for c in (before, after))


def _bad_char(value: str) -> str | None:
    for i, c in enumerate(value):
        if unicodedata.category(c) in _BAD_CATEGORIES and not (c in "\u200c\u200d" and _joiner_ok(value, i)):
            return c
    return None


def normalise_id(value: Any, field: str = "user_id", *, max_chars: int | None = None) -> str:
    """``value`` as a valid id (NFC text), or :class:`InvalidId` with a clear message."""
    reason = f"invalid_{field}"
    if isinstance(value, int) and not isinstance(value, bool) and field in INTEGER_ID_FIELDS:
        value = str(value)
    if not isinstance(value, str):
        kinds = "a string or an integer" if field in INTEGER_ID_FIELDS else "a string"
        raise InvalidId(f"{field} must be {kinds}, got {type(value).__name__} {visible_text(value, 60)}", reason)
    bad = _bad_char(value)  # before NFC: normalisation must not hide a lone surrogate
    if bad is None:
        value = unicodedata.normalize("NFC", value)
        bad = _bad_char(value)
    if bad is not None:
        raise InvalidId(f"{field} '{visible_text(value, 60)}' has control characters or invisible format characters "
                        f"(U+{ord(bad):04X} {unicodedata.name(bad, unicodedata.category(bad))}); ids must be "
                        "visible text", reason)
    if not value.strip():
        raise InvalidId(f"{field} is required: a non-empty string" if field == "user_id"
                        else f"{field} must be a non-empty string", reason)
    if value != value.strip():
        raise InvalidId(f"{field} '{visible_text(value, 60)}' has surrounding whitespace; ids are compared exactly",
                        reason)
    limit = door_limits().max_id_chars if max_chars is None else max_chars
    if len(value) > limit:
        raise InvalidId(f"{field} has {len(value)} characters; the limit is {limit} (var max_user_id_chars)", reason)
    return value


def visible_text(value: Any, limit: int) -> str:
    """A printable, bounded rendering of a refused value (JSON for non-strings; control and
    format characters as \\uXXXX escapes), for error messages and reject rows."""
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=False, default=repr)
        except (ValueError, RecursionError):
            value = repr(type(value))
    out = "".join(c if unicodedata.category(c) not in _BAD_CATEGORIES else f"\\u{ord(c):04x}" for c in value[:limit])
    return out + ("..." if len(value) > limit else "")


def forget_id(value: Any, field: str = "user_id") -> str | None:
    """The id to forget: ``normalise_id(value)``, but a non-empty string that breaks the rule is
    kept as given, because rows landed before the rule existed may carry it and forgetting them
    must stay possible. None stays None; other types raise InvalidId."""
    if value is None:
        return None
    try:
        return normalise_id(value, field, max_chars=10**9)
    except InvalidId:
        if isinstance(value, str) and value:
            return value
        raise
