"""The PostgreSQL build lock (recall_shim/targets/postgres/build_lock.py, docs/scaling_out.md): a
lease row, each statement its own transaction, so it works through a transaction-mode pooler.
Two holders in two processes take turns; a killed holder's row is taken over after its lease;
build and forget wait on it (here: fail at once with StoreBusy, wait 0)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from recall_shim import LocalPostgres, PgConnection, PgMemoryStore, StoreBusy
from recall_shim.targets.postgres.build_lock import BuildLock, lock_holder
from recall_shim.targets.postgres.forget import forget_pg

from .conftest import start_postgres

HOLDER = """
import json, sys, time
from recall_shim import PgConnection
from recall_shim.targets.postgres.build_lock import BuildLock
conn = PgConnection(**json.loads(sys.argv[1]))
name, lease, hold = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
with BuildLock(conn, "test", lease=lease, wait=600) as lock:
    with conn.connect(autocommit=True) as con:
        con.execute("insert into public.lock_log (who, what) values (%s, 'start')", [name])
        print("held", flush=True)
        time.sleep(hold)
        con.execute("insert into public.lock_log (who, what) values (%s, 'end')", [name])
print(json.dumps({"took_over": lock.took_over}), flush=True)
"""


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgConnection]:
    server = LocalPostgres(tmp_path_factory.mktemp("pg_lock") / "data")
    c = start_postgres(server)  # migrated: the build_lock row exists
    with c.connect(autocommit=True) as con:
        con.execute("create table public.lock_log (seq serial primary key, who text, what text)")
    yield c
    server.stop()


def holder(conn: PgConnection, name: str, lease: float, hold: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", HOLDER, json.dumps(dataclasses.asdict(conn)), name, str(lease),
                             str(hold)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_take_turns(conn: PgConnection) -> None:
    with conn.connect(autocommit=True) as con:
        con.execute("truncate public.lock_log")
    procs = [holder(conn, name, 30, 2) for name in ("a", "b")]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all(json.loads(out.splitlines()[-1]) == {"took_over": None} for out, _ in outs)
    with conn.connect() as con:
        log = con.execute("select who, what from public.lock_log order by seq").fetchall()
    first, second = log[0][0], log[2][0]
    # never both inside: each start is followed by its own end
    assert log == [(first, "start"), (first, "end"), (second, "start"), (second, "end")] and first != second
    assert lock_holder(conn) is None  # both released


def test_killed_holders_lock_is_taken_over_after_its_lease(conn: PgConnection) -> None:
    p = holder(conn, "killed", 10, 3600)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    p.kill()  # no release, no more renewals
    p.wait(timeout=60)
    held = lock_holder(conn)
    assert held is not None and held["pid"] == p.pid
    with pytest.raises(StoreBusy, match=f"pid {p.pid}"):
        BuildLock(conn, "test", wait=0).acquire()  # the lease is still running
    with BuildLock(conn, "test", wait=120) as lock:  # waits for the lease to run out, then takes the row
        assert lock.took_over is not None and lock.took_over["pid"] == p.pid
        held = lock_holder(conn)
        assert held is not None and held["owner"] == lock.token
    assert lock_holder(conn) is None


def test_build_and_forget_wait_for_the_lock(conn: PgConnection, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_PG_LOCK_WAIT", "0")
    store = PgMemoryStore(conn, work_dir=tmp_path / "work")
    try:
        with BuildLock(conn, "test", wait=0):
            with pytest.raises(StoreBusy, match="cannot build: schema agent_memory is locked"):
                store.build()
            with pytest.raises(StoreBusy, match="cannot forget: schema agent_memory is locked"):
                forget_pg(conn, tmp_path / "work", user_id="nobody", actor="test")
        assert not (tmp_path / "work" / "target").exists()  # dbt never started
        report: Any = forget_pg(conn, tmp_path / "work", user_id="nobody", actor="test")  # free again
        assert report.found is False
    finally:
        store.close()
