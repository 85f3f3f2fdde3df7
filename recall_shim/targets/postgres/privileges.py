"""What a PostgreSQL role may do, turned into the shim's errors (docs/scaling_out.md, "Roles").

* :func:`pg_errors` / :func:`privileged`: a statement the role lacks the privilege for raises
  :class:`PermissionDenied` with one line (role, action, schema, the server's reason), not
  psycopg's traceback.
* :func:`require_owner`: builds, forgets and migrations run DDL (or delete everywhere): only a
  role that may create in the schema (the owner) runs them; others are refused up front.
* :func:`record_accesses`: recall lands its access events; a role that may not INSERT them (a
  reader granted without access recording) still gets its answer, with an AccessNotRecorded
  warning, as the DuckDB read-only store does.
"""

from __future__ import annotations

import functools
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar, cast

from recall_shim.errors import AccessNotRecorded, PermissionDenied
from recall_shim.targets.postgres.server import PgConnection, land_access, one_line

__all__ = ["pg_errors", "privileged", "may_create", "require_owner", "record_accesses", "ROLES_DOC"]

ROLES_DOC = "docs/scaling_out.md, Roles"
F = TypeVar("F", bound=Callable[..., Any])


def _denied(conn: PgConnection, action: str, reason: str) -> PermissionDenied:
    return PermissionDenied(f"role {conn.user} may not {action} in schema {conn.schema}: {one_line(reason)}"
                            f" ({ROLES_DOC})")


@contextmanager
def pg_errors(conn: PgConnection, action: str) -> Iterator[None]:
    """Turn a privilege failure inside the block into PermissionDenied (one line)."""
    import psycopg

    try:
        yield
    except psycopg.errors.InsufficientPrivilege as exc:
        raise _denied(conn, action, exc.diag.message_primary or str(exc)) from None


def privileged(action: str) -> Callable[[F], F]:
    """Decorate a store method (its ``self.conn`` is the PgConnection): privilege failures
    become PermissionDenied naming ``action``."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(self: Any, *args: Any, **kwargs: Any) -> Any:
            with pg_errors(self.conn, action):
                return fn(self, *args, **kwargs)
        return cast(F, inner)
    return wrap


def may_create(conn: PgConnection) -> bool:
    """Whether the connected role may create objects in the store's schema (the owner may)."""
    with conn.connect(autocommit=True) as con:
        return bool(con.execute("select has_schema_privilege(%s, 'CREATE')", [conn.schema]).fetchone()[0])


def require_owner(conn: PgConnection, action: str) -> None:
    """Raise PermissionDenied unless the role may create in the schema: ``action`` (build,
    forget, migrate) runs as the store's owner."""
    with pg_errors(conn, action):
        allowed = may_create(conn)
    if not allowed:
        raise _denied(conn, action, f"{action} runs as the store's owner (a role with CREATE on schema"
                                    f" {conn.schema}); this role has not")


def record_accesses(conn: PgConnection, events: Iterable[Mapping[str, Any]]) -> int:
    """Land recall access events; when the role may not INSERT them, warn AccessNotRecorded
    and return 0 (the recall still answers)."""
    import psycopg

    try:
        return land_access(conn, events)
    except psycopg.errors.InsufficientPrivilege as exc:
        warnings.warn(AccessNotRecorded(
            f"recall answered, but role {conn.user} may not record its access events in schema {conn.schema}"
            f" ({one_line(exc.diag.message_primary or str(exc))}): strength is not reinforced ({ROLES_DOC})"),
            stacklevel=3)
        return 0
