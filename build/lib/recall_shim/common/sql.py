"""The one place Python turns a path or a name into SQL text (twin of macros/vars.sql).

Values from callers are bound as parameters; what cannot be bound (ATTACH, COPY and read_*
take their file as a literal; identifiers) goes through these functions and nowhere else:

- ``sql_literal(value)``: a quoted string literal, quotes doubled, NUL refused.
- ``sql_ident(name)``: a quoted identifier, double quotes doubled.
- ``glob_escape(path)``: a path as a DuckDB glob pattern that matches only itself, for the
  readers that expand globs (``read_parquet``, ``read_json``, ``glob``).

docs/data_protection.md "Settings and paths in SQL" describes the rule.
"""

from __future__ import annotations

import os

__all__ = ["glob_escape", "sql_ident", "sql_literal"]


def sql_literal(value: str | os.PathLike[str]) -> str:
    """``value`` (a string or a path) as a SQL string literal: ``it's`` -> ``'it''s'``.
    Backslashes stay literal in DuckDB and in PostgreSQL (standard_conforming_strings)."""
    text = os.fspath(value)
    if not isinstance(text, str):
        raise TypeError(f"sql_literal takes a string or a path, got {type(value).__name__}")
    if "\x00" in text:
        raise ValueError("sql_literal: the string holds a NUL character")
    return "'" + text.replace("'", "''") + "'"


def sql_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier: ``a"b`` -> ``"a""b"``."""
    if "\x00" in name:
        raise ValueError("sql_ident: the name holds a NUL character")
    return '"' + name.replace('"', '""') + '"'


def glob_escape(path: str | os.PathLike[str]) -> str:
    """``path`` as a DuckDB glob that matches only that path: each ``*``, ``?`` and ``[``
    becomes a one-character class (``[*]``, ``[?]``, ``[[]``)."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"glob_escape takes a string or a path, got {type(path).__name__}")
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
