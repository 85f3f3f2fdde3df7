"""Least privilege on the PostgreSQL target (docs/scaling_out.md, "Roles"): three login roles
with passwords (scram-sha-256 over the bundled server's socket) -- the owner migrates and builds,
the writer only remembers, the reader only recalls; neither runs DDL; a permission failure, a
schema behind its migrations and an unreachable server are one-line errors. One server, one build."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest

from recall_shim import (AgentMemoryError, ConnectionFailed, InvalidInput, LocalPostgres, PermissionDenied,
                         PgConnection, PgMemoryStore, StoreNotMigrated)
from recall_shim.common.sql import sql_literal
from recall_shim.errors import AccessNotRecorded
from recall_shim.targets.postgres.migrations import LATEST_VERSION, migrate
from recall_shim.targets.postgres.roles import apply_grants
from recall_shim.targets.postgres.server import FORGET_COLUMNS, LANDING_TABLES, MESSAGE_COLUMNS

from .conftest import DEMO_LOG, free_port, start_postgres

EXE = str(Path(sys.executable).with_name("agent-memory"))
ROLES = {"owner": "mem_owner", "writer": "mem_writer", "reader": "mem_reader"}
SCHEMA = "mem"


def cli(conn: PgConnection, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **conn.dbt_env(), "AGENT_MEMORY_PG_WORK_DIR": str(work)}
    env.pop("AGENT_MEMORY_TARGET", None)
    return subprocess.run([EXE, "--target", "postgres", *args], env=env, capture_output=True, text=True, timeout=600)


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    """The CLI failed with exit 2 and one line on stderr (no traceback); returns that line."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agent-memory: ") and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The three roles (password logins) on one server; the owner migrated (CLI), granted (CLI)
    and built the writer's messages."""
    server = LocalPostgres(tmp_path_factory.mktemp("pg_roles") / "data")
    admin = start_postgres(server)
    work = tmp_path_factory.mktemp("pg_roles_work")
    conns: dict[str, PgConnection] = {}
    with admin.connect(autocommit=True) as con:
        for what, role in ROLES.items():
            password = f"{what}-secret"
            con.execute(f"create role {role} login password {sql_literal(password)}")
            conns[what] = dataclasses.replace(admin, user=role, password=password, schema=SCHEMA)
        con.execute(f"grant create on database {admin.dbname} to {ROLES['owner']}")
        # the three roles log in with their passwords (the bundled server trusts everyone else)
        hba = Path(con.execute("show hba_file").fetchone()[0])
        hba.write_text(f"local all {','.join(ROLES.values())} scram-sha-256\n" + hba.read_text())
        con.execute("select pg_reload_conf()")
    r = cli(conns["owner"], work, "migrate")
    assert r.returncode == 0 and f"applied {LATEST_VERSION} migrations" in r.stdout, r.stderr
    r = cli(conns["owner"], work, "migrate")
    assert r.returncode == 0 and "up to date" in r.stdout, r.stderr
    r = cli(conns["owner"], work, "grants", "--writer", ROLES["writer"], "--reader", ROLES["reader"], "--apply")
    assert r.returncode == 0 and "applied" in r.stdout, r.stderr
    writer = PgMemoryStore(conns["writer"], work_dir=work)
    assert writer.ingest(DEMO_LOG).rows == 10
    writer.remember("alice", "I live in Lyon", session_id="s1", message_id="alice-1")
    owner = PgMemoryStore(conns["owner"], work_dir=work)
    owner.build()
    yield {"conns": conns, "admin": admin, "work": work, "owner": owner, "writer": writer}
    for store in (owner, writer):
        store.close()
    server.stop()


def rows(conn: PgConnection, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with conn.connect() as con:
        return con.execute(sql, params or []).fetchall()


def test_migrations_are_recorded_and_idempotent(pg: dict[str, Any]) -> None:
    owner = pg["conns"]["owner"]
    versions = rows(owner, f"select version from {SCHEMA}.shim_migrations order by 1")
    assert [v for (v,) in versions] == list(range(1, LATEST_VERSION + 1))
    again = migrate(owner)
    assert again.applied == [] and again.version == LATEST_VERSION
    cols = {t: [c for (c,) in rows(owner, "select column_name from information_schema.columns where table_schema = %s"
                                          " and table_name = %s", [SCHEMA, LANDING_TABLES[t]])]
            for t in ("messages", "forget")}
    # arrived_at: the hot tail's look-up column (migration 8, recall_shim/targets/postgres/tail_landing.py)
    assert sorted(cols["messages"]) == sorted((*MESSAGE_COLUMNS, "arrived_at"))
    assert sorted(cols["forget"]) == sorted(FORGET_COLUMNS)
    # the owner owns what the migrations created
    owners = rows(owner, "select distinct tableowner from pg_tables where schemaname = %s", [SCHEMA])
    assert owners == [(ROLES["owner"],)]


def test_writer_remembers_but_cannot_recall_build_or_forget(pg: dict[str, Any]) -> None:
    writer = pg["writer"]
    writer.remember("bob", "I prefer tea", session_id="s1", message_id="bob-1")
    landed = rows(pg["conns"]["owner"], f"select user_id from {SCHEMA}.session_log_landing where message_id = 'bob-1'")
    assert landed == [("bob",)]
    with pytest.raises(PermissionDenied) as denied:
        writer.recall("where does alice live?", user_id="alice")
    message = str(denied.value)
    assert "\n" not in message and ROLES["writer"] in message and "recall" in message
    with pytest.raises(PermissionDenied, match="build runs as the store's owner"):
        writer.build()
    with pytest.raises(PermissionDenied, match="forget"):
        writer.forget(user_id="alice")
    assert rows(pg["conns"]["owner"], f"select count(*) from {SCHEMA}.long_term_memory where user_id = 'alice'")[0][0] > 0


def test_reader_recalls_and_records_access_but_cannot_write(pg: dict[str, Any]) -> None:
    owner = pg["conns"]["owner"]
    reader = PgMemoryStore(pg["conns"]["reader"], work_dir=pg["work"])
    before = rows(owner, f"select count(*) from {SCHEMA}.recall_access_landing")[0][0]
    results = reader.recall("where does the user live?", user_id="alice", min_sim=0.0, record_access=True)
    assert "User lives in Lyon" in [m.content for m in results]
    assert rows(owner, f"select count(*) from {SCHEMA}.recall_access_landing")[0][0] == before + len(results)
    with pytest.raises(PermissionDenied) as denied:
        reader.remember("alice", "I live in Rome")
    assert "\n" not in str(denied.value) and ROLES["reader"] in str(denied.value)
    with pytest.raises(PermissionDenied):
        reader.ingest(DEMO_LOG, force=True)
    with pytest.raises(PermissionDenied):
        reader.build()
    # the landing tables and the audit are not the reader's to read
    with pg["conns"]["reader"].connect() as con, pytest.raises(psycopg.errors.InsufficientPrivilege):
        con.execute(f"select content from {SCHEMA}.session_log_landing")
    # ... yet the reader recalls a message the writer landed after the build (the hot tail, through
    # the owner's tail_landing function and the reader's temporary tables), without a warning
    pg["writer"].remember("erin", "I live in Bergen", session_id="s1", message_id="erin-1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tail = reader.recall("where does the user live?", user_id="erin", min_sim=0.0, kinds=["fact"])
    assert [m.content for m in tail] == ["User lives in Bergen"]
    reader.close()


def test_reader_without_access_grant_still_recalls_and_warns(pg: dict[str, Any]) -> None:
    owner = pg["conns"]["owner"]
    apply_grants(owner, reader=ROLES["reader"], reader_records_access=False)
    try:
        reader = PgMemoryStore(pg["conns"]["reader"], work_dir=pg["work"])
        with pytest.warns(AccessNotRecorded, match="may not record"):
            results = reader.recall("where does the user live?", user_id="alice", min_sim=0.0, record_access=True)
        assert "User lives in Lyon" in [m.content for m in results]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert reader.recall("where does the user live?", user_id="alice", record_access=False)
        reader.close()
    finally:
        apply_grants(owner, reader=ROLES["reader"])


@pytest.mark.parametrize("who", ["writer", "reader"])
def test_neither_writer_nor_reader_runs_ddl(pg: dict[str, Any], who: str) -> None:
    conn = pg["conns"][who]
    for sql in (f"create table {SCHEMA}.evil (a int)", f"drop table {SCHEMA}.session_log_landing",
                f"alter table {SCHEMA}.long_term_memory add column evil int", f"truncate {SCHEMA}.long_term_memory",
                "create schema evil", f"create or replace function {SCHEMA}.embed(a text, b text, c text)"
                                      " returns int language sql as 'select 1'"):
        with conn.connect() as con, pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute(sql)
    with pytest.raises(PermissionDenied, match="migrate"):
        migrate(dataclasses.replace(conn, schema="evil"))


def test_cli_errors_are_one_line(pg: dict[str, Any]) -> None:
    conns, work = pg["conns"], pg["work"]
    line = one_line_error(cli(conns["reader"], work, "remember", "--user", "alice", "I live in Rome"))
    assert ROLES["reader"] in line and "remember" in line
    line = one_line_error(cli(conns["writer"], work, "recall", "--user", "alice", "where does alice live?"))
    assert ROLES["writer"] in line and "recall" in line
    line = one_line_error(cli(conns["writer"], work, "build"))
    assert "owner" in line
    wrong = dataclasses.replace(conns["reader"], password="not-the-password")
    line = one_line_error(cli(wrong, work, "recall", "--user", "alice", "x"))
    assert "password authentication failed" in line and "not-the-password" not in line
    with pytest.raises(ConnectionFailed):
        PgMemoryStore(wrong, work_dir=work)


def test_behind_schema_is_refused_to_the_reader_and_adopted_by_the_owner(pg: dict[str, Any]) -> None:
    """A schema created before migrations existed (ensure_landing's tables, without the later
    columns, and no version table): a reader is told to migrate; the owner's first use adopts it."""
    owner = dataclasses.replace(pg["conns"]["owner"], schema="legacy")
    with owner.connect() as con:
        con.execute("create schema legacy")
        con.execute("create table legacy.session_log_landing (landing_id text primary key, user_id text, content text)")
        con.execute("insert into legacy.session_log_landing values ('l1', 'alice', 'kept')")
        con.execute(f"grant usage on schema legacy to {ROLES['reader']}")
        con.commit()
    reader = dataclasses.replace(pg["conns"]["reader"], schema="legacy")
    with pytest.raises(StoreNotMigrated) as behind:
        PgMemoryStore(reader, work_dir=pg["work"])
    assert "\n" not in str(behind.value) and "agent-memory --target postgres migrate" in str(behind.value)
    assert isinstance(behind.value, AgentMemoryError)
    PgMemoryStore(owner, work_dir=pg["work"]).close()  # the owner's first use migrates
    assert [v for (v,) in rows(owner, "select version from legacy.shim_migrations order by 1")] == \
        list(range(1, LATEST_VERSION + 1))
    assert rows(owner, "select landing_id, content, door_reason from legacy.session_log_landing") == [("l1", "kept", None)]


def test_unreachable_server_is_one_line(tmp_path: Path) -> None:
    closed = PgConnection(host="127.0.0.1", port=free_port(), schema="mem")
    with pytest.raises(ConnectionFailed) as failed:
        PgMemoryStore(closed, work_dir=tmp_path)
    assert "\n" not in str(failed.value) and "127.0.0.1" in str(failed.value)
    line = one_line_error(cli(closed, tmp_path, "recall", "--user", "alice", "x"))
    assert "cannot connect to PostgreSQL at 127.0.0.1" in line


def test_tls_settings_come_from_the_environment(pg: dict[str, Any], tmp_path: Path) -> None:
    env = {**pg["admin"].dbt_env(), "AGENT_MEMORY_PG_SSLMODE": "verify-full",
           "AGENT_MEMORY_PG_SSLROOTCERT": str(tmp_path / "ca.pem")}
    conn = PgConnection.from_env(env)
    assert (conn.sslmode, conn.sslrootcert) == ("verify-full", str(tmp_path / "ca.pem"))
    assert PgConnection.from_env(conn.dbt_env()) == conn
    assert {k: conn.connect_kwargs()[k] for k in ("sslmode", "sslrootcert")} == {
        "sslmode": "verify-full", "sslrootcert": str(tmp_path / "ca.pem")}
    assert PgConnection.from_env(pg["admin"].dbt_env() | {"AGENT_MEMORY_PG_SSLMODE": ""}).sslmode == "prefer"
    with pytest.raises(InvalidInput, match="sslmode"):
        PgConnection.from_env(env | {"AGENT_MEMORY_PG_SSLMODE": "on"})
    import yaml

    from recall_shim.common.paths import project_dir

    profile = yaml.safe_load((project_dir() / "profiles.yml").read_text())["agent_memory"]["outputs"]["postgres"]
    assert "env_var('AGENT_MEMORY_PG_SSLMODE', 'prefer')" in profile["sslmode"]
    assert "env_var('AGENT_MEMORY_PG_SSLROOTCERT'" in profile["sslrootcert"]
