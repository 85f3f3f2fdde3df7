"""Disk full, read-only store, interrupted forget (docs/data_protection.md, "Failures of the disk").

How the failures are made real (the tests run as root, here and in CI):
* disk full: the store is copied onto a small tmpfs (``mount -t tmpfs -o size=...``) and the rest
  of it is filled with a filler file, so every later write gets ENOSPC from the kernel;
* read-only: the store folder is bind-mounted read-only (``mount --bind`` + ``remount,ro``), so
  every write fails with EROFS, for root too;
* an interrupted forget: ``kill -9`` of the forget process at each step (a child process that
  SIGKILLs itself at the chosen journal write), or the disk filling up during the warehouse copy.

One store is built for the module; every test works on a copy of its files.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from recall_shim import MemoryStore
from recall_shim.common.locks import file_lock
from recall_shim.serving.published import prune_snapshots

from .conftest import copy_store
from .test_forget import files_containing

EXE = str(Path(sys.executable).with_name("agent-memory"))
TS = "2026-11-01 10:00:00"
GONE_MARKERS = ["Zqfullcity", "zqfulltea"]
ROWS = [
    {"user_id": "gone", "session_id": "g", "msg_seq": 1, "role": "user",
     "content": "I live in Zqfullcity. I prefer zqfulltea.", "ts": TS, "message_id": "g-1"},
    {"user_id": "keep", "session_id": "k", "msg_seq": 1, "role": "user",
     "content": "I live in Zqkeepcity. I prefer green tea.", "ts": TS, "message_id": "k-1"},
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = MemoryStore(tmp_path_factory.mktemp("diskfail") / "store.duckdb")
    store.remember_many(ROWS)
    store.build()
    store.recall("where does the user live?", user_id="gone", min_sim=-1)  # an access event of "gone"
    store.close()
    return store.paths.db


@contextlib.contextmanager
def small_disk(folder: Path, size_mb: int) -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(folder)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        if os.geteuid() == 0:
            pytest.fail(f"cannot mount a small tmpfs as root: {out.stderr}")
        pytest.skip(f"a small tmpfs needs root: {out.stderr}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the file system of ``folder`` until ``leave`` bytes are left (0: full)."""
    filler = folder / "filler.bin"
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb", buffering=0) as fh:
        try:
            fh.write(b"\0" * max(0, free - leave))
            while leave == 0:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=300, env=dict(os.environ))


def recalled(db: Path, user: str, *extra: str) -> tuple[list[str], str]:
    out = cli("recall", "where does the user live?", "--user", user, "--db", str(db), "--min-sim", "-1",
              "--json", *extra)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    return [m["content"] for m in json.loads(out.stdout)], out.stderr


def temp_files(db: Path) -> list[str]:
    return sorted(str(p) for p in db.parent.rglob("*") if p.is_file() and (
        ".forget-tmp" in p.name or ".work." in p.name or p.name.endswith((".tmp", ".wal"))
        or "forget-journal" in p.name))


def audit_lines(db: Path) -> list[dict]:
    audit = db.with_suffix(".audit.jsonl")
    return [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []


def test_recall_on_a_full_disk_answers_and_drops_the_access_event(template: Path, tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", 64) as disk:
        db = copy_store(template, disk)
        events = sorted(p.name for p in (disk / "store.inbox" / "access").iterdir())
        fill(disk)
        found, err = recalled(db, "keep", "--record-access")
        assert "User lives in Zqkeepcity" in found
        assert "access event was not recorded" in err and "No space left" in err
        assert sorted(p.name for p in (disk / "store.inbox" / "access").iterdir()) == events  # no partial file
        # a write that cannot land is refused with a clear error (HTTP: a JSON error), nothing partial
        messages = sorted(p.name for p in (disk / "store.inbox" / "messages").iterdir())
        out = cli("remember", "I prefer cocoa.", "--user", "keep", "--db", str(db))
        assert out.returncode == 2 and "not stored" in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert sorted(p.name for p in (disk / "store.inbox" / "messages").iterdir()) == messages


@contextlib.contextmanager
def read_only_view(source: Path, folder: Path) -> Iterator[Path]:
    """``source`` bind-mounted read-only at ``folder``: every write there fails with EROFS, for
    root too (permission bits would not hold for root, and a non-root user cannot reach a venv
    inside a private temporary folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["mount", "--bind", str(source), str(folder)], capture_output=True, text=True)
    if out.returncode != 0:
        if os.geteuid() == 0:
            pytest.fail(f"cannot bind-mount as root: {out.stderr}")
        pytest.skip(f"a read-only bind mount needs root: {out.stderr}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True, text=True)
        assert ro.returncode == 0, ro.stderr
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_read_only_store_serves_reads(template: Path, tmp_path: Path) -> None:
    db = copy_store(template, tmp_path / "store")
    with read_only_view(db.parent, tmp_path / "ro") as ro:
        ro_db = ro / db.name
        probe = subprocess.run(["touch", str(ro / "probe")], capture_output=True, text=True)
        assert probe.returncode != 0 and "Read-only" in probe.stderr, probe.stderr  # really read-only
        found, _ = recalled(ro_db, "keep", "--no-access")
        assert "User lives in Zqkeepcity" in found
        found, err = recalled(ro_db, "keep", "--record-access")  # with access recording: answered, warned
        assert "User lives in Zqkeepcity" in found and "access event was not recorded" in err


# the child forgets "gone" and SIGKILLs itself at one point: before the journal write that
# records step N done (the step's work is done, not recorded: it is repeated), right after the
# intent is written (N=0), or once the audit line is written (before the journal is removed)
KILLER = """
import os, signal, sys
from recall_shim import MemoryStore
from recall_shim.forget import duckdb as _forget
point = sys.argv[2]
save, clear = _forget.save_journal, _forget.clear_journal
def save_journal(paths, journal):
    if point == "intent":
        save(paths, journal)
    if point == str(len(journal["done"])) or point == "intent":
        os.kill(os.getpid(), signal.SIGKILL)
    save(paths, journal)
def clear_journal(paths):
    if point == "audit":
        os.kill(os.getpid(), signal.SIGKILL)
    clear(paths)
_forget.save_journal, _forget.clear_journal = save_journal, clear_journal
MemoryStore(sys.argv[1]).forget(user_id="gone", actor="killer")
"""


def check_completed(db: Path) -> None:
    """The forget of "gone" completed: one audit line, no temporary file, no forgotten byte."""
    assert [(a["user_id"], a["scope"]) for a in audit_lines(db)] == [("gone", "user")]
    assert temp_files(db) == []
    store = MemoryStore(db)
    for marker in GONE_MARKERS:
        assert files_containing(store, marker) == [], marker
    assert "User lives in Zqkeepcity" in recalled(db, "keep", "--no-access")[0]


@pytest.mark.parametrize("point", ["intent", "1", "2", "3", "4", "audit"])
def test_forget_killed_at_each_step_is_completed_by_the_rerun(template: Path, tmp_path: Path, point: str) -> None:
    db = copy_store(template, tmp_path / "s")
    child = subprocess.run([sys.executable, "-c", KILLER, str(db), point], capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == -signal.SIGKILL, child.stderr
    journal = db.with_suffix(".forget-journal.json")
    assert journal.exists()
    if point != "audit":
        assert audit_lines(db) == []
    with file_lock(db.with_suffix(".build.lock"), exclusive=True):  # as a running build would
        # the snapshots serve nothing of the pending forget (the reader cannot complete it now)
        assert recalled(db, "gone", "--no-access")[0] == []
        assert "User lives in Zqkeepcity" in recalled(db, "keep", "--no-access")[0]
    out = cli("forget", "--user", "gone", "--db", str(db), "--json")
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["found"] and rep["actor"] == "killer" and rep["memories"] >= 1  # the interrupted request's report
    check_completed(db)


def test_forget_on_a_full_disk_fails_cleanly_and_completes_later(template: Path, tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", 64) as disk:
        db = copy_store(template, disk)
        filler = fill(disk, leave=db.stat().st_size // 2)  # room for the journal, not for the warehouse copy
        out = cli("forget", "--user", "gone", "--db", str(db))
        assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
        assert "No space left" in out.stderr or "space" in out.stderr.lower(), out.stderr
        assert [p for p in temp_files(db) if "forget-journal.json" not in p] == []  # no partial copy
        assert audit_lines(db) == []
        # the snapshot stops serving the user at once (and the recall cannot finish the forget yet)
        assert recalled(db, "gone", "--no-access")[0] == []
        filler.unlink()
        assert recalled(db, "gone", "--no-access")[0] == []  # this open completes the forget
        check_completed(db)


def test_forget_of_nothing_reports_nothing_removed(template: Path, tmp_path: Path) -> None:
    db = copy_store(template, tmp_path / "s")
    for what in (["--user", "nobody"], ["--memory", "mem_nope"]):
        out = cli("forget", *what, "--db", str(db), "--json")
        assert out.returncode == 0, out.stderr
        rep = json.loads(out.stdout)
        assert (rep["found"], rep["memories"], rep["messages"]) == (False, 0, 0)
        assert sum(rep["removed"].values()) == 0, rep["removed"]
        text = cli("forget", *what, "--db", str(db))
        assert "nothing stored was found" in text.stdout and "removed 0 memories and 0 messages" in text.stdout, text.stdout


def test_stale_temporary_files_are_pruned(template: Path, tmp_path: Path) -> None:
    db = copy_store(template, tmp_path / "s")
    store = MemoryStore(db)
    p = store.paths
    old = time.time() - 3600
    stale = [p.serving / ".snap-20260101T000000-forgetabc.work.duckdb", p.serving / "snap-20260101T000000.duckdb.wal",
             p.db.parent / f".{p.db.name}.0badc0de.forget-tmp", p.messages / ".20260101T000000-abc.jsonl.tmp",
             p.access / ".20260101T000000-abc.jsonl.forget.tmp"]
    fresh = [p.messages / ".20990101T000000-new.jsonl.tmp", p.serving / ".snap-new.work.duckdb"]
    for f in stale + fresh:
        f.write_bytes(b"zqstale")
    for f in stale:
        os.utime(f, (old, old))
    served = sorted(x.name for x in p.serving.iterdir() if not x.name.startswith(".") and not x.name.endswith(".wal"))
    with file_lock(p.write_lock, exclusive=False):  # a writer is landing: landing temporaries stay
        with file_lock(p.build_lock, exclusive=True):  # as a build holds it while pruning
            prune_snapshots(p)
        assert all(f.exists() for f in stale[3:])
    with file_lock(p.build_lock, exclusive=True):
        prune_snapshots(p)
    assert [f for f in stale if f.exists()] == []
    assert all(f.exists() for f in fresh)  # younger than the safe age: maybe in use
    assert sorted(x.name for x in p.serving.iterdir() if not x.name.startswith(".")) == served
    assert "User lives in Zqkeepcity" in [m.content for m in store.recall("where?", user_id="keep", min_sim=-1)]
