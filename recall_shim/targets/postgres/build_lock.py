"""The build lock of a PostgreSQL store: a lease held in a row of ``<schema>.build_lock``, so that
builds and forgets on one schema take turns also through a transaction-mode pooler (PgBouncer),
which keeps no session-level state such as ``pg_advisory_lock`` between transactions.

The table (migration 6) holds one row: ``owner`` (a random token of the holder, NULL when free),
``host``, ``pid``, ``acquired_at``, ``expires_at``. Every statement runs alone in its own
autocommit transaction, with server-side prepared statements off, so any pooler mode carries it:

* **acquire**: one ``UPDATE ... WHERE owner IS NULL OR expires_at < now() RETURNING``; when it
  updates no row, another holder's lease is live: poll again until ``wait`` seconds have passed,
  then raise :class:`StoreBusy` naming the holder (host, pid, since when);
* **renew**: a thread moves ``expires_at`` to ``now() + lease`` every ``lease / 3`` seconds while
  the holder works (dbt runs, VACUUM), ``WHERE owner = <token>``;
* **release**: in ``finally``, ``UPDATE ... SET owner = NULL WHERE owner = <token>``.

A holder that dies (killed, machine lost) stops renewing: its row is taken over once
``expires_at`` has passed, at most ``lease`` seconds after its last renewal. Every time is the
server's ``now()``, so client clocks do not matter. A holder whose lease ran out before it
finished (it stalled longer than the lease) learns so at release: StoreBusy, "the lease expired".

Defaults: lease 60 s (``AGENT_MEMORY_PG_LOCK_LEASE``), wait 3600 s (``AGENT_MEMORY_PG_LOCK_WAIT``;
0 fails at once when the lock is held). See docs/scaling_out.md, "Concurrency and forget".
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from recall_shim.common.sql import sql_ident
from recall_shim.errors import InvalidInput, StoreBusy
from recall_shim.targets.postgres.server import PgConnection

__all__ = ["BuildLock", "LOCK_TABLE", "LEASE_ENV", "WAIT_ENV", "create_lock_table", "lock_holder"]

LOCK_TABLE = "build_lock"
LEASE_ENV = "AGENT_MEMORY_PG_LOCK_LEASE"
WAIT_ENV = "AGENT_MEMORY_PG_LOCK_WAIT"
_DEFAULT_LEASE = 60.0
_DEFAULT_WAIT = 3600.0
_POLL = 0.5
log = logging.getLogger(__name__)


def create_lock_table(cur: Any, schema: str) -> None:
    """Migration step: the lock table and its one row (free)."""
    t = f"{sql_ident(schema)}.{sql_ident(LOCK_TABLE)}"
    cur.execute(f"create table if not exists {t} (id int primary key check (id = 1), owner text, host text,"
                " pid int, acquired_at timestamptz, expires_at timestamptz)")
    cur.execute(f"insert into {t} (id) values (1) on conflict (id) do nothing")


def _seconds(value: float | None, env: str, default: float) -> float:
    if value is None:
        raw = os.environ.get(env)
        try:
            value = float(raw) if raw else default
        except ValueError:
            raise InvalidInput(f"{env} must be a number of seconds (got {raw[:40]!r})") from None
    if not value >= 0:  # also NaN
        raise InvalidInput(f"{env}: seconds must be >= 0 (got {value})")
    return float(value)


def _autocommit(conn: PgConnection) -> Any:
    con = conn.connect(autocommit=True)
    con.prepare_threshold = None  # no server-side prepared statements: a transaction pooler may switch backends
    return con


def lock_holder(conn: PgConnection) -> dict[str, Any] | None:
    """The live holder of ``conn.schema``'s build lock (owner, host, pid, acquired_at,
    expires_at), or None when the lock is free or its lease has expired."""
    with _autocommit(conn) as con:
        row = con.execute(f"select owner, host, pid, acquired_at, expires_at from {_table(conn.schema)}"
                          " where id = 1 and owner is not null and expires_at >= now()").fetchone()
    return None if row is None else dict(zip(("owner", "host", "pid", "acquired_at", "expires_at"), row))


def _table(schema: str) -> str:
    return f"{sql_ident(schema)}.{sql_ident(LOCK_TABLE)}"


class BuildLock:
    """``with BuildLock(conn, "build"):`` holds ``conn.schema``'s build lock for the block (see
    the module docstring). ``lease`` and ``wait`` in seconds (default: the environment, else 60
    and 3600). ``took_over`` names the expired holder whose row this lock replaced, if any."""

    def __init__(self, conn: PgConnection, what: str, *, lease: float | None = None,
                 wait: float | None = None) -> None:
        self.conn = conn
        self.what = what
        self.lease = max(_seconds(lease, LEASE_ENV, _DEFAULT_LEASE), 1.0)
        self.wait = _seconds(wait, WAIT_ENV, _DEFAULT_WAIT)
        self.token = uuid.uuid4().hex
        self.took_over: dict[str, Any] | None = None
        self.lost = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _try(self, con: Any) -> bool:
        t = _table(self.conn.schema)
        row = con.execute(
            f"with prev as (select id, owner, host, pid from {t} where id = 1 for update)"
            f" update {t} b set owner = %s, host = %s, pid = %s, acquired_at = now(),"
            "  expires_at = now() + make_interval(secs => %s)"
            " from prev where b.id = prev.id and (prev.owner is null or b.expires_at < now())"
            " returning prev.owner, prev.host, prev.pid",
            [self.token, socket.gethostname(), os.getpid(), self.lease]).fetchone()
        if row is None:
            return False
        if row[0] is not None:
            self.took_over = {"owner": row[0], "host": row[1], "pid": row[2]}
            log.warning("took over the expired %s lock of %s pid %s", LOCK_TABLE, row[1], row[2])
        return True

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait
        with _autocommit(self.conn) as con:
            con.execute(f"insert into {_table(self.conn.schema)} (id) values (1) on conflict (id) do nothing")
            while not self._try(con):
                if time.monotonic() >= deadline:
                    holder = con.execute(f"select host, pid, acquired_at from {_table(self.conn.schema)}"
                                         " where id = 1").fetchone() or (None, None, None)
                    raise StoreBusy(f"cannot {self.what}: schema {self.conn.schema} is locked by another build or"
                                    f" forget (host {holder[0]}, pid {holder[1]}, since {holder[2]}); waited"
                                    f" {self.wait:g} s ({WAIT_ENV})")
                time.sleep(min(_POLL, max(deadline - time.monotonic(), 0.01)))
        self._renewer = threading.Thread(target=self._renew, name=f"{LOCK_TABLE}-renew", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        con: Any = None
        try:
            while not self._stop.wait(self.lease / 3):
                try:
                    if con is None or con.closed:
                        con = _autocommit(self.conn)
                    cur = con.execute(f"update {_table(self.conn.schema)} set expires_at = now() +"
                                      " make_interval(secs => %s) where id = 1 and owner = %s",
                                      [self.lease, self.token])
                    if cur.rowcount == 0:  # the lease ran out and another holder took the row
                        self.lost = True
                        return
                except Exception as exc:  # a network blip: try again at the next tick
                    log.warning("could not renew the %s lease: %s", LOCK_TABLE, exc)
                    if con is not None:
                        con.close()
                    con = None
        finally:
            if con is not None:
                con.close()

    def release(self) -> None:
        """Stop renewing and free the row (if this holder still has it). Raises StoreBusy when
        the lease had expired and another holder took the lock meanwhile."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with _autocommit(self.conn) as con:
            cur = con.execute(f"update {_table(self.conn.schema)} set owner = null, host = null, pid = null,"
                              " acquired_at = null, expires_at = null where id = 1 and owner = %s", [self.token])
            held = cur.rowcount == 1
        if self.lost or not held:
            raise StoreBusy(f"{self.what} on schema {self.conn.schema} outlived its lock: the lease"
                            f" ({self.lease:g} s, {LEASE_ENV}) expired and another build or forget took it over")

    def __enter__(self) -> "BuildLock":
        self.acquire()
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        try:
            self.release()
        except StoreBusy:
            if exc_type is None:
                raise
