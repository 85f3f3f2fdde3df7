"""`--db` (and `--target`) work before and after the command name: a value given before the
subcommand is never overwritten by the subcommand's default, so writes, forgets and reads go to
the store the user named, never silently to the default store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recall_shim.interfaces.cli import build_parser

EXE = str(Path(sys.executable).with_name("agent-memory"))
COMMANDS = {  # every subcommand with the arguments it needs to parse
    "ingest": ["f.jsonl"], "remember": ["hello", "--user", "u"], "build": [], "recall": ["q", "--user", "u"],
    "forget": ["--user", "u"], "similarity": ["q", "--user", "u"], "demo": [], "report": [], "serve": [], "mcp": [],
    "migrate": [], "grants": ["--reader", "r"],
}


def run(args: list[str], default_db: Path) -> subprocess.CompletedProcess:
    # the default store is a temp path too: a command that ignores --db writes there
    env = {**os.environ, "AGENT_MEMORY_DB": str(default_db)}
    return subprocess.run([EXE, *args], capture_output=True, text=True, env=env, timeout=300)


def both_positions(command: str, db: str, rest: list[str]) -> list[list[str]]:
    return [["--db", db, command, *rest], [command, *rest, "--db", db]]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_takes_db_and_target_before_and_after_its_name(command: str) -> None:
    parser = build_parser()
    for argv in both_positions(command, "/tmp/x.duckdb", COMMANDS[command]):
        args = parser.parse_args(argv)
        assert args.db == "/tmp/x.duckdb", argv
    assert parser.parse_args([command, *COMMANDS[command]]).db is None
    before = parser.parse_args(["--target", "duckdb", command, *COMMANDS[command]])
    after = parser.parse_args([command, *COMMANDS[command], "--target", "duckdb"])
    assert before.target == after.target == "duckdb"


@pytest.mark.parametrize("position", [0, 1], ids=["before", "after"])
def test_writes_and_forget_go_to_the_named_store(tmp_path: Path, position: int) -> None:
    db = tmp_path / "named.duckdb"
    default = tmp_path / "default.duckdb"
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"user_id": "u", "session_id": "s", "msg_seq": 1, "role": "user",
                               "content": "I like tea.", "ts": "2026-01-01 10:00:00"}) + "\n")
    for command, rest in [("remember", ["hello", "--user", "u"]), ("ingest", [str(log)]),
                          ("forget", ["--user", "someone-else", "--actor", "tester"])]:
        out = run(both_positions(command, str(db), rest)[position], default)
        assert out.returncode == 0, (command, out.stderr)
    landed = [p for p in (tmp_path / "named.inbox" / "messages").glob("*.jsonl") if p.stat().st_size]
    assert len(landed) == 2  # remember + ingest
    audit = (tmp_path / "named.audit.jsonl").read_text().splitlines()
    assert len(audit) == 1 and '"tester"' in audit[0]
    assert not (tmp_path / "default.inbox").exists() and not (tmp_path / "default.audit.jsonl").exists()


@pytest.mark.parametrize("position", [0, 1], ids=["before", "after"])
def test_reads_open_the_named_store(tmp_path: Path, position: int) -> None:
    db = tmp_path / "named.duckdb"
    default = tmp_path / "default.duckdb"
    for command, rest in [("recall", ["q", "--user", "u"]), ("similarity", ["q", "--user", "u"]),
                          ("report", ["--out", str(tmp_path / "r.html")])]:
        out = run(both_positions(command, str(db), rest)[position], default)
        assert out.returncode == 2 and str(db) in out.stderr, (command, out.stderr)  # not built yet: named
        assert str(default) not in out.stderr
