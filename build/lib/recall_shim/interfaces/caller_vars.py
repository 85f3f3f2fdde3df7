"""The dbt vars a server caller may set (``POST /build`` and the MCP ``build`` tool): an explicit
allow-list, each validated by type and range. Every other var (paths, URLs, credentials, limits,
SQL-shaped settings) stays as the operator configured it in dbt_project.yml or the environment.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from recall_shim.errors import InvalidInput

# YYYY-MM-DD, optionally with [T ]HH:MM[:SS[.ffffff]] and Z or +HH:MM; nothing else.
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:\d{2})?)?")
_AS_OF_YEARS = (1970, 2200)


def _as_of(value: Any) -> str | None:
    """A strict ISO-8601 date or timestamp, returned as a naive UTC ``YYYY-MM-DD HH:MM:SS[.ffffff]``."""
    if value is None:
        return None
    if not isinstance(value, str) or not _ISO.fullmatch(value):
        raise InvalidInput("var as_of must be an ISO-8601 date or timestamp such as "
                           "'2026-12-01' or '2026-12-01T08:00:00Z'")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(f"var as_of is not a valid date: {exc}") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    if not _AS_OF_YEARS[0] <= parsed.year <= _AS_OF_YEARS[1]:
        raise InvalidInput(f"var as_of must lie between the years {_AS_OF_YEARS[0]} and {_AS_OF_YEARS[1]}")
    return parsed.isoformat(sep=" ")


ALLOWED: dict[str, Callable[[Any], Any]] = {"as_of": _as_of}


def caller_vars(vars: Any) -> dict[str, Any] | None:
    """The validated vars of a server caller, or None when none are given. Raises
    :class:`InvalidInput` (HTTP 400) naming the first var that is not on the allow-list or
    whose value is out of type or range."""
    if vars is None:
        return None
    if not isinstance(vars, Mapping):
        raise InvalidInput("vars must be an object")
    out: dict[str, Any] = {}
    for name, value in vars.items():
        check = ALLOWED.get(name) if isinstance(name, str) else None
        if check is None:
            shown = repr(name)[:80]
            raise InvalidInput(f"var {shown} cannot be set by a server caller; allowed: {', '.join(sorted(ALLOWED))}")
        out[name] = check(value)
    return out or None
