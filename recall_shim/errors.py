"""Exceptions raised by the recall shim. All derive from :class:`AgentMemoryError`."""

from __future__ import annotations

import re


class AgentMemoryError(Exception):
    """Base class for every error the shim raises on purpose."""


class StoreNotBuilt(AgentMemoryError):
    """No published serving snapshot exists yet: run ``agent-memory build`` first."""


class DimensionMismatch(AgentMemoryError):
    """A vector's length differs from the store's configured embedding dimension."""


class InvalidQuery(AgentMemoryError):
    """A recall request is malformed (empty text, bad top_k, NaN in a vector, ...)."""


class InvalidInput(AgentMemoryError):
    """An ingest file or a remembered message cannot be read at all."""


class InvalidId(InvalidInput, InvalidQuery):
    """A user/session/agent/message id breaks the one id rule (recall_shim/write/ids.py): not a string,
    empty, surrounding whitespace, control or invisible format characters, too long. ``reason`` is
    the reject reason a landed row gets for it (``invalid_user_id``, ``invalid_session_id``, ...).
    Raised by writes and reads alike, so it is both an InvalidInput and an InvalidQuery."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class UnknownEmbeddingModel(AgentMemoryError):
    """The configured embedding model is not in the registry."""


class StoreBusy(AgentMemoryError):
    """Another process holds the warehouse file (an open DuckDB connection outside the shim)."""


# ANSI escape sequences (dbt colours its log lines): CSI sequences and two-character escapes
ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")
# the environment under which dbt writes plain text (no colour codes on stdout or in dbt.log)
DBT_PLAIN_OUTPUT = {"DBT_USE_COLORS": "false", "DBT_USE_COLORS_FILE": "false"}
# A store's build (MemoryStore / PgMemoryStore.build without a selector) leaves out dbt's unit
# tests: they check the SQL against fixed fixtures (their seeds mocked too), so a store's data
# cannot change their result; CI's plain `dbt build` and any `dbt build` / `dbt test` by hand run
# them. Data tests run on every build.
STORE_BUILD_EXCLUDES = ["--exclude-resource-type", "unit_test"]


def plain_text(text: str) -> str:
    """``text`` without ANSI escape sequences (dbt's colours)."""
    return ANSI_ESCAPE.sub("", text)


class BuildFailed(AgentMemoryError):
    """``dbt build`` exited non-zero; its output is attached, as plain text (no colour codes)."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(plain_text(message))
        self.output = plain_text(output)


class BackendUnavailable(AgentMemoryError):
    """The PostgreSQL backend cannot be used: a package is missing or the server cannot start."""


class InvalidStorePath(InvalidInput):
    """A store path DuckDB cannot open as named: it holds a backslash (read as a folder separator),
    a ``?`` (read as the start of connection options) or a NUL character."""


class SnapshotIncomplete(StoreNotBuilt):
    """A published snapshot lists a layer file that is gone: it cannot be served."""


class TooLarge(InvalidInput):
    """A request or one of its values is over a size limit (HTTP 413): the body, a message's
    content, the total query text of one recall request."""


class ContentTooLong(TooLarge):
    """A message's content is longer than the store's var ``max_content_chars`` (HTTP 413)."""


class BuildInProgress(AgentMemoryError):
    """This server is running a build already; a second one is refused, not queued (HTTP 409)."""

class StorageFailure(AgentMemoryError):
    """The file system refused a write the operation needs (disk full, read-only file system,
    permission denied). Nothing acknowledged is lost; a ``forget`` resumes where it stopped."""


class AccessNotRecorded(UserWarning):
    """A recall answered, but its access event could not be written (disk full, read-only store)."""


class ConnectionFailed(BackendUnavailable):
    """The PostgreSQL server cannot be reached or refuses the login (wrong host, port, user,
    password, database, TLS settings); the message is one line, without the password."""


class PermissionDenied(AgentMemoryError):
    """The PostgreSQL role lacks a privilege the operation needs (a reader remembering, a writer
    recalling or building; docs/scaling_out.md, "Roles")."""


class StoreNotMigrated(AgentMemoryError):
    """The PostgreSQL schema is behind the shim's migrations and this role may not migrate it:
    run ``agent-memory --target postgres migrate`` as the store's owner."""
