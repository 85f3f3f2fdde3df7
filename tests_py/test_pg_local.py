"""`agent-memory pg-local start|status|stop` (recall_shim/targets/postgres/local_server.py): the
bundled PostgreSQL + pgvector as a one-command trial; the printed export lines are enough to
ingest, build and recall on the postgres target, and no password is printed."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from .conftest import DEMO_LOG

EXE = str(Path(sys.executable).with_name("agent-memory"))


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], env=env or dict(os.environ), capture_output=True, text=True, timeout=900)


def exported(stdout: str) -> dict[str, str]:
    pairs = [shlex.split(line)[1].split("=", 1) for line in stdout.splitlines() if line.startswith("export ")]
    return {k: v for k, v in pairs}


def test_pg_local_start_use_and_stop(tmp_path: Path) -> None:
    folder = tmp_path / "trial"
    started = run("pg-local", "start", "--dir", str(folder))
    try:
        assert started.returncode == 0, started.stderr
        env = exported(started.stdout)
        assert env["AGENT_MEMORY_TARGET"] == "postgres" and Path(env["AGENT_MEMORY_PG_HOST"]).is_dir()  # a socket
        assert "PASSWORD" not in started.stdout + started.stderr
        status = run("pg-local", "status", "--dir", str(folder))
        assert status.returncode == 0 and exported(status.stdout) == env
        shell = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY_")}
        shell.update(env, AGENT_MEMORY_PG_WORK_DIR=str(tmp_path / "work"))
        r = run("--target", "postgres", "ingest", str(DEMO_LOG), env=shell)
        assert r.returncode == 0 and "10" in r.stdout, r.stderr
        r = run("build", env=shell)  # the target comes from the exported AGENT_MEMORY_TARGET
        assert r.returncode == 0 and "on postgres" in r.stdout, r.stderr[-3000:]
        r = run("recall", "喜欢什么输出方式", "--user", "demo", "--json", "--top-k", "1", "--min-sim", "0", env=shell)
        assert r.returncode == 0 and '"source_message_ids": ["demo-s1-1"]' in r.stdout, r.stderr
    finally:
        stopped = run("pg-local", "stop", "--dir", str(folder))
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
    after = run("pg-local", "status", "--dir", str(folder))
    assert after.returncode == 1 and "no local PostgreSQL runs" in after.stdout
