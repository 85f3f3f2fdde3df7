"""The console script is a thin layer over the same API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recall_shim import InvalidInput, MemoryStore
from recall_shim.interfaces.cli import build_parser

EXE = str(Path(sys.executable).with_name("agent-memory"))


def run(*args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], input=stdin, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)


def test_every_command_is_documented() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"ingest", "remember", "build", "recall", "demo"} <= set(sub.choices)
    for name, p in sub.choices.items():
        assert p.description, name
        assert "--db" in p.format_help(), name
        for action in p._actions:
            if action.option_strings and action.dest not in ("help",):
                assert action.help, f"{name} {action.option_strings} has no help"


def test_recall_json_and_batch(demo_store: MemoryStore, tmp_path: Path) -> None:
    db = str(demo_store.paths.db)
    out = run("recall", "喜欢什么输出方式", "--user", "demo", "--json", "--top-k", "2", "--min-sim", "0", "--db", db)
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    assert len(results) == 2 and results[0]["source_message_ids"] == ["demo-s1-1"]  # the message that answers it
    assert set(results[0]) >= {"memory_id", "kind", "content", "similarity", "strength", "score", "source_message_ids"}
    batch = tmp_path / "q.jsonl"
    batch.write_text(
        json.dumps({"id": "a", "user_id": "demo", "query": "熟悉什么部署工具", "top_k": 1, "min_sim": 0}) + "\n"
        + json.dumps({"id": "b", "user_id": "alice", "query": "where does she live?", "top_k": 3}) + "\n"
        + json.dumps({"id": "c", "user_id": "demo", "query": ""}) + "\n"
    )
    out = run("recall", "--batch", str(batch), "--db", db, "--no-access")
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert [x["id"] for x in lines] == ["a", "b", "c"]
    assert lines[0]["results"][0]["kind"] == "skill" and len(lines[0]["results"]) == 1
    assert "error" in lines[2] and "empty" in lines[2]["error"]
    assert out.returncode == 1  # one line failed


def test_env_db_and_clear_errors(demo_store: MemoryStore, tmp_path: Path) -> None:
    out = run("recall", "x", "--json", "--user", "demo", env={"AGENT_MEMORY_DB": str(demo_store.paths.db)})
    assert out.returncode == 0 and isinstance(json.loads(out.stdout), list)
    out = run("recall", "x", "--user", "demo", "--db", str(tmp_path / "never-built.duckdb"))
    assert out.returncode == 2 and "agent-memory build" in out.stderr and "Traceback" not in out.stderr
    out = run("recall", "x", "--db", str(demo_store.paths.db))
    assert out.returncode == 2 and "--user is required" in out.stderr


def test_demo_command(tmp_path: Path) -> None:
    out = run("demo", "--db", str(tmp_path / "d.duckdb"))
    assert out.returncode == 0, out.stderr
    assert "用户偏好简洁的输出" in out.stdout and "Preferences:" in out.stdout
    again = run("demo", "--db", str(tmp_path / "d.duckdb"))
    assert again.returncode == 0 and "already ingested" in again.stdout


def test_batch_lines_are_parsed_like_http_requests(demo_store: MemoryStore, tmp_path: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_text("\n".join(json.dumps(line) for line in [
        {"id": "ok", "user_id": "demo", "query": "熟悉什么部署工具", "top_k": 1, "min_sim": 0},
        {"id": "coerced", "user_id": "demo", "query": "x", "top_k": "1"},
        {"id": "unknown", "user_id": "demo", "query": "x", "colour": "red"},
        {"id": "kind", "user_id": "demo", "query": "x", "kinds": ["skills"]},
    ]) + "\n")
    out = run("recall", "--batch", str(batch), "--db", str(demo_store.paths.db), "--no-access")
    lines = {x["id"]: x for x in map(json.loads, out.stdout.splitlines())}
    assert lines["ok"]["results"][0]["kind"] == "skill"
    assert "top_k must be an integer, got the string '1'" in lines["coerced"]["error"]
    assert "unknown argument colour" in lines["unknown"]["error"]
    assert "unknown kind 'skills'" in lines["kind"]["error"]
    assert out.returncode == 1


def test_unknown_kind_is_an_error(demo_store: MemoryStore) -> None:
    out = run("recall", "x", "--user", "demo", "--kind", "skills", "--db", str(demo_store.paths.db), "--no-access")
    assert out.returncode == 2 and out.stdout == "", out.stdout
    assert "unknown kind 'skills'; the kinds are fact, preference, skill, episode, assistant" in out.stderr


def test_empty_content_is_refused_and_nothing_lands(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    for content in ("", "   "):
        out = run("remember", content, "--user", "u1", "--db", str(db))
        assert out.returncode == 2 and "content" in out.stderr and "Traceback" not in out.stderr, out.stderr
    # the Python API the CLI wraps refuses it too, with the same sentence
    store = MemoryStore(db)
    for content in ("", " \n\t\u3000", None):
        with pytest.raises(InvalidInput, match="content must not be empty"):
            store.remember("u1", content)  # type: ignore[arg-type]
    assert not [f for f in store.paths.messages.glob("*.jsonl") if not f.name.startswith("_")]


def test_forgetting_nothing_reports_zero(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    out = run("forget", "--memory", "mem_nope", "--db", db)
    assert out.returncode == 0, out.stderr
    assert "removed 0 memories and 0 messages" in out.stdout and "nothing stored was found" in out.stdout
    rep = json.loads(run("forget", "--user", "nobody", "--json", "--db", db).stdout)
    assert (rep["found"], rep["memories"], rep["messages"]) == (False, 0, 0)
    assert set(rep["removed"].values()) <= {0}  # nothing removed; index upkeep is "housekeeping"


@pytest.mark.parametrize("command", [["forget", "--user", "nobody", "--json"],
                                     ["recall", "喜欢什么输出方式", "--user", "demo", "--json", "--no-access"]],
                         ids=["forget", "recall"])
def test_a_closed_pipe_is_no_traceback(demo_store: MemoryStore, tmp_path: Path, command: list[str]) -> None:
    """`agent-memory forget ... --json | head -c1`, `recall --json | head -c 10`: the reader is gone
    before the output is written."""
    db = str(tmp_path / "s.duckdb") if command[0] == "forget" else str(demo_store.paths.db)
    proc = subprocess.Popen([EXE, *command, "--db", db],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode == 141
