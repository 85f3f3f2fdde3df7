"""Crash safety: kill -9 a writer, ``dbt build`` or the builder process at any moment; no
acknowledged write is lost, no half-written snapshot is ever served, and the next build recovers."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from recall_shim import MemoryStore
from recall_shim.serving.index import index_dir
from recall_shim.serving.published import ready_snapshots
from recall_shim.serving.snapshot import connect_snapshot

from .conftest import copy_store, query
from .test_concurrency import read_log, spawn


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(x) for x in text.split()]


def wait_for_dbt(builder_pid: int, timeout: float = 60) -> int:
    """The pid of the dbt process the builder started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in children(builder_pid):
            try:
                if "dbt" in Path(f"/proc/{c}/cmdline").read_bytes().decode(errors="replace"):
                    return c
            except FileNotFoundError:
                pass
        time.sleep(0.01)
    raise AssertionError("the builder never started dbt")


def wait_gone(pid: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.split(")")[-1].split()[0] == "Z":  # zombie: exited, not yet reaped
                return
        except (ProcessLookupError, FileNotFoundError):
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not exit")


def acked_ids(*logs: Path) -> list[str]:
    return [r["message_id"] for log in logs for r in read_log(log)]


def unpublished(store: MemoryStore) -> list[str]:
    return sorted(p.name for p in store.paths.serving.glob("snap-*.duckdb") if not p.with_suffix(".ready").exists())


@pytest.fixture(scope="module")
def killed_writers_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryStore, list[Path]]:
    """Writers killed with -9 mid-write, a torn temp file, then user "u"'s "I prefer green tea."
    (message m0) and one build: the store test_killed_writers_lose_no_acknowledged_write checks,
    and the built template the later tests copy (the first build of each)."""
    tmp_path = tmp_path_factory.mktemp("killed-writers")
    store = MemoryStore(tmp_path / "store.duckdb")
    logs = []
    for n, delay in enumerate((0.2, 0.55, 0.9)):
        log = tmp_path / f"ack-{n}.jsonl"
        logs.append(log)
        p = spawn("writer", str(store.paths.db), f"k{n}", str(log), str(tmp_path / "never"), "80", "0.005")
        deadline = time.monotonic() + 60
        while not read_log(log) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        assert p.wait(timeout=30) == -signal.SIGKILL or p.returncode == 0
    # what a kill between write and rename leaves behind: a torn hidden temp file
    (store.paths.messages / ".20261130T000000000000-deadbeef0000.jsonl.tmp").write_text(
        '{"landing_id": "torn", "user_id": "k0", "content": "I prefer hal')
    store.remember("u", "I prefer green tea.", message_id="m0")
    store.build()
    return store, logs


def landed_lines(store: MemoryStore) -> int:
    return sum(len(f.read_text().splitlines()) for f in store.paths.messages.glob("*.jsonl"))


def test_killed_writers_lose_no_acknowledged_write(killed_writers_store: tuple[MemoryStore, list[Path]]) -> None:
    store, logs = killed_writers_store
    acked = acked_ids(*logs)
    assert acked
    loaded = {r[0] for r in query(store, "select message_id from session_messages")}
    assert [m for m in acked if m not in loaded] == []
    print(f"kill -9 writers: {len(acked)} acknowledged writes, {sum(m in loaded for m in acked)} present after the build")
    assert query(store, "select count(*) from session_log")[0][0] == landed_lines(store)
    assert query(store, "select count(*) from session_log where landing_id = 'torn'")[0][0] == 0


TOPICS = ("jazz", "sushi", "chess")


def test_killed_dbt_never_exposes_a_half_snapshot_and_the_next_build_recovers(
        tmp_path: Path, killed_writers_store: tuple[MemoryStore, list[Path]]) -> None:
    # a copy of the built template: "I prefer green tea." (m0) of user u built and published
    store = MemoryStore(copy_store(killed_writers_store[0].paths.db, tmp_path / "store"))
    first = str(ready_snapshots(store.paths)[-1])
    acked = ["m0"]
    caught_publish = False
    # kill dbt at fixed moments of a build, then once while it writes the snapshot file
    for n, delay in enumerate((1.5, 4.0, None)):
        acked.append(store.remember("u", f"I like {TOPICS[n]}.", message_id=f"m{n + 1}"))
        known = {p.name for p in store.paths.serving.glob("snap-*.duckdb")}
        builder = spawn("builder", str(store.paths.db), str(tmp_path / "builds.jsonl"), "1", "-")
        dbt = wait_for_dbt(builder.pid)
        if delay is not None:
            time.sleep(delay)
        else:
            deadline = time.monotonic() + 120
            while builder.poll() is None and time.monotonic() < deadline:
                fresh = [n for n in os.listdir(store.paths.serving)
                         if n.endswith(".duckdb") and n.startswith("snap-") and n not in known]
                if fresh and not (store.paths.serving / fresh[0]).with_suffix(".ready").exists():
                    caught_publish = True
                    break
        try:
            os.kill(dbt, signal.SIGKILL)
        except ProcessLookupError:
            pass
        builder.wait(timeout=120)
        # whatever was killed, readers see only whole published snapshots and keep working
        for snap in ready_snapshots(store.paths):
            con = connect_snapshot(snap)  # a delta reads its layers
            assert con.execute("select count(*) from long_term_memory").fetchall()[0][0] >= 1
            con.close()
        hits = store.recall("what does the user drink?", user_id="u", min_sim=0.0, record_access=False)
        assert hits and store.snapshot_path in ready_snapshots(store.paths)
    outcomes = read_log(tmp_path / "builds.jsonl")
    assert len(outcomes) == 3
    print("killed mid-publish:", caught_publish)
    if caught_publish:  # the build killed mid-publish left a snapshot file without its marker
        assert unpublished(store)

    # a torn copy of a snapshot without a marker (what a kill mid-publish leaves) is never served
    torn = store.paths.serving / "snap-99991231T000000000000-torn0000.duckdb"
    data = Path(first).read_bytes()
    torn.write_bytes(data[: len(data) // 2])
    store.recall("what does the user drink?", user_id="u", min_sim=0.0, record_access=False)
    assert store.snapshot_path != torn

    torn.unlink()
    # what a builder killed while writing the serving index leaves: a temporary index folder
    half_index = store.paths.serving / (Path(first).stem + ".index.tmp-99999")
    half_index.mkdir()
    (half_index / "vectors.f32").write_bytes(b"half a vector")
    result = store.build()
    assert not half_index.exists()
    assert store.recall("tea", user_id="u", min_sim=-1, record_access=False)
    assert store.snapshot_path is not None and (index_dir(store.snapshot_path) / "meta.json").exists()
    assert result.snapshot is not None and Path(result.snapshot) == ready_snapshots(store.paths)[-1]
    loaded = {r[0] for r in query(store, "select message_id from session_messages")}
    assert [m for m in acked if m not in loaded] == []
    assert query(store, "select count(*) from session_log where user_id = 'u'")[0][0] == len(acked)
    assert query(store, "select count(*) from session_log")[0][0] == landed_lines(store)  # nothing loaded twice
    assert unpublished(store) == [], "prune left a half-written snapshot behind"
    contents = {h.content for h in store.recall("hobbies", user_id="u", top_k=10, min_sim=-1, kinds=["preference"],
                                                record_access=False)}
    assert {f"User likes {t}" for t in TOPICS} <= contents  # "I like jazz." (clause-level extraction)


def test_killed_builder_process_does_not_let_two_dbt_runs_collide(
        tmp_path: Path, killed_writers_store: tuple[MemoryStore, list[Path]]) -> None:
    # a copy of the built template: "I prefer green tea." (m0) of user u built
    store = MemoryStore(copy_store(killed_writers_store[0].paths.db, tmp_path / "store"))
    store.remember("u", "I live in Bergen.", message_id="m1")
    builder = spawn("builder", str(store.paths.db), str(tmp_path / "builds.jsonl"), "1", "-")
    dbt = wait_for_dbt(builder.pid)
    builder.send_signal(signal.SIGKILL)  # the Python process, not dbt: dbt is orphaned and runs on
    builder.wait(timeout=30)
    store.remember("u", "I work as a baker.", message_id="m2")
    result = store.build()  # waits for the orphan's lock instead of failing on the warehouse lock
    wait_gone(dbt)
    assert result.snapshot is not None
    loaded = {r[0] for r in query(store, "select message_id from session_messages where user_id = 'u'")}
    assert loaded == {"m0", "m1", "m2"}
