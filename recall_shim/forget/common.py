"""What a forget is, on either target: its report, the ids it removes, the id check and the actor
recorded in the audit line. The DuckDB run is recall_shim/forget/duckdb.py, the PostgreSQL one
recall_shim/targets/postgres/forget.py."""

from __future__ import annotations

import getpass
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from recall_shim.errors import InvalidInput

__all__ = ["ACTOR_ENV", "ID_COLUMNS", "ForgetReport", "ForgetTargets", "check_forget_id", "checked_forget_request",
           "default_actor", "memory_owner", "restat_statement"]

ACTOR_ENV = "AGENT_MEMORY_ACTOR"
ID_COLUMNS = ("memory_id", "message_id", "landing_id")


@dataclass(frozen=True)
class ForgetReport:
    """What one ``forget`` did. ``memories`` and ``messages`` count the distinct memories and
    messages found and deleted (0 when nothing was stored), ``removed`` the rows deleted per
    relation or landing folder; ``housekeeping`` what was cleaned up besides (superseded
    snapshots, temporary files, dbt's target/ and logs/, the fresh index's size), never counted
    as removed."""

    audit_id: str
    scope: str
    user_id: str | None
    memory_id: str | None
    actor: str
    forgotten_at: str
    found: bool
    memories: int
    messages: int
    removed: dict[str, int] = field(default_factory=dict)
    housekeeping: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ForgetTargets:
    scope: str
    user_id: str | None          # user scope: the user; memory scope: the owner (if known)
    memory_ids: set[str]
    message_ids: set[str]        # message_ids of user_id's rows only (a message is (user_id, message_id))
    landing_ids: set[str]
    # message_ids of the user's rows found only in the landing files (tombstoned against replays)
    landed_message_ids: set[str] = field(default_factory=set)




def check_forget_id(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{name} is not valid Unicode (lone surrogate)") from None
    return value


def default_actor() -> str:
    env = os.environ.get(ACTOR_ENV)
    if env:
        return env
    try:
        return getpass.getuser()
    except Exception:  # no login name in this environment
        return "unknown"


def checked_forget_request(user_id: Any, memory_id: Any, actor: Any) -> tuple[str | None, str | None, str]:
    """A forget request's (user_id, memory_id, actor), each checked (``check_forget_id``), the
    actor defaulting to ``default_actor()``; at least one of user_id and memory_id is needed.
    Both targets' forget start here."""
    if user_id is None and memory_id is None:
        raise InvalidInput("forget needs user_id or memory_id")
    return (None if user_id is None else check_forget_id(user_id, "user_id"),
            None if memory_id is None else check_forget_id(memory_id, "memory_id"),
            check_forget_id(actor, "actor") if actor is not None else default_actor())


def memory_owner(memory_id: str, owners: set[str], user_id: str | None, where: str) -> str | None:
    """The user a forgotten memory belongs to: its one owner found in the ``where`` (checked
    against ``user_id`` when the caller named one), else ``user_id``."""
    if len(owners) > 1:
        raise InvalidInput(f"memory {memory_id!r} has several owners in the {where}: {sorted(owners)}")
    owner = next(iter(owners), None)
    if user_id is not None and owner is not None and owner != user_id:
        raise InvalidInput(f"memory {memory_id!r} does not belong to user {user_id!r}")
    return owner if owner is not None else user_id


def restat_statement(stats_table: str, stats_columns: set[str], stats_sql: str) -> str:
    """The insert that puts back the BM25 statistics of the users whose term rows relation
    ``tail_term_rows`` holds: ``stats_sql`` is the published ``tail_term_stats`` statement (the
    build's ``memory_term_stats_rows`` macro, compiled for the target), ``stats_table`` the quoted
    ``memory_term_stats`` and ``stats_columns`` its columns. A forget by memory id deletes the
    owner's rows of that per-user aggregate; without them the owner's remaining memories would be
    scored over no document until the next build."""
    cols = [c for c in ("user_id", "term", "df", "n_docs", "avg_doc_len", "term_stat_id") if c in stats_columns]
    return (f"insert into {stats_table} ({', '.join(cols)}) select {', '.join(cols)}"
            f" from (select *, user_id || ':' || term as term_stat_id from ({stats_sql}) as s) as s")
