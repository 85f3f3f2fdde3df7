"""Layered serving snapshots (docs/serving.md "Layered snapshots"): an incremental build publishes a
delta (the memories written since the previous snapshot, their term-index rows, every current
memory's strength) whose views serve exactly what the warehouse holds; compaction publishes a new
base; prune keeps the layers a kept snapshot reads; forget leaves nothing forgotten in any layer.

One store is built step by step once (fixture ``steps``: a base, a base compacted by share, three
deltas); a copy of the whole store after each build keeps that step's state, which the tests check,
or copy again to go on from it (a forced base, a forget, missing layer files)."""

from __future__ import annotations

import os
import re
from datetime import datetime, timedelta, timezone
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from recall_shim import MemoryStore, StoreNotBuilt
from recall_shim.errors import SnapshotIncomplete
from recall_shim.serving.published import ready_snapshots
from recall_shim.serving.snapshot import connect_snapshot

from .conftest import copy_store, query
from .test_forget import files_containing, tables_containing

# strength as of tomorrow: the recall events the tests land now reinforce, and every build of a test
# computes strength at the same moment (so a forced base equals the deltas)
AS_OF = {"as_of": (datetime.now(timezone.utc) + timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")}
# the run settings of the file's builds: two --vars in all, so dbt parses twice (builds with the same
# vars share the parse). LAYERS: a chain of 4 layers (base included) is compacted into a base (a chain
# of 1, 2 or 3 gets a delta); SHARE: deltas past 1% of the base's rows are compacted into a base.
LAYERS = {**AS_OF, "serving_max_layers": 4}
SHARE = {**AS_OF, "serving_compact_share": 0.01}
THINGS = ["green tea", "dark mode", "short answers", "tables", "python scripts", "hiking trips", "jazz records",
          "rainy days", "sushi dinners", "chess puzzles", "board games", "mountain bikes"]
QUERIES = ["what drink do I like?", "where do I live?", "which music do I enjoy?", "what do I like to eat?"]
# the warehouse's current rows, as the snapshot's tables must serve them (all columns)
SERVED = {
    "long_term_memory": "select * from long_term_memory where valid_to is null order by memory_id",
    "memory_term_index": "select * from memory_term_index order by term_entry_id",
    "memory_term_stats": "select * from memory_term_stats order by term_stat_id",
}
NON_STRENGTH = ("memory_id, user_id, kind, slot, content, embedding, created_at, mention_count, source_message_ids,"
                " valid_from, session_ids, agent_ids, is_question")


def _land(store: MemoryStore, rows: list[tuple[str, str, str, str]]) -> None:
    """rows: (user_id, message_id, ts, content); agent a1 wrote them."""
    store.remember_many({"user_id": u, "session_id": f"s-{mid}", "agent_id": "a1", "msg_seq": 1, "role": "user",
                         "content": text, "ts": ts, "message_id": mid} for u, mid, ts, text in rows)


def _base_rows() -> list[tuple[str, str, str, str]]:
    rows = [(f"u{u}", f"m{u}-{i}", f"2026-03-01 09:{i:02d}:00", f"I prefer {t} over most things.")
            for u in range(3) for i, t in enumerate(THINGS)]
    return [*rows, ("u0", "lyon", "2026-03-01 10:00:00", "I live in Lyon.")]


def _build(store: MemoryStore, vars: dict[str, object]) -> tuple[Path, str, float]:
    """Build with ``vars``; return the published snapshot, its kind line and the publish hook's seconds."""
    result = store.build(vars=vars)
    out = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    kind = re.findall(r"serving snapshot kind: (.*)", out)
    secs = re.findall(r"OK hook: agent_memory\.on-run-end\.1 \.+ \[OK in ([0-9.]+)s\]", out)
    assert result.snapshot is not None and kind and secs, out[-3000:]
    return Path(result.snapshot), kind[-1], float(secs[-1])


def _layers(snapshot: Path) -> list[tuple]:
    con = duckdb.connect(str(snapshot), read_only=True)
    try:
        return con.execute("select layer, file, alias, rows, watermark, kind from serving_layers order by layer").fetchall()
    finally:
        con.close()


def _served(snapshot: Path, sql: str) -> list[tuple]:
    con = connect_snapshot(snapshot)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple]:
    return [tuple(r[:2]) for r in con.execute(f"describe {table}").fetchall()]


def _assert_serves_warehouse(store: MemoryStore, snapshot: Path) -> None:
    wh = duckdb.connect(str(store.paths.db), read_only=True)
    snap = connect_snapshot(snapshot)
    try:
        for table, sql in SERVED.items():
            assert _columns(snap, table) == _columns(wh, table), table
            got, want = snap.execute(sql).fetchall(), wh.execute(sql).fetchall()
            assert got and got == want, table
    finally:
        snap.close()
        wh.close()


def _recall_all(store: MemoryStore) -> list:
    out = []
    for q in QUERIES:
        for user in ("u0", "u1"):
            for agent in (None, "a1"):  # the index path, and the compiled statement (agent scope)
                out.append([m.as_dict() for m in store.recall(q, user_id=user, top_k=8, min_sim=0.0,
                                                              record_access=False, agent_id=agent)])
    out.append(store.similarity_distribution(QUERIES[:2], user_id="u0"))
    return out


# u2's marker memory in the base: test_forget_leaves_nothing_in_any_layer forgets u2
ZB = ("u2", "zb", "2026-03-01 11:00:00", "I prefer zanzibarian marmalade every morning.")


@dataclass(frozen=True)
class Step:
    """One build of the ``steps`` store: the copy of the whole store made right after it (its
    warehouse file), the snapshot it published (a file name), its kind line, the publish hook's seconds."""
    db: Path
    snapshot: str
    kind: str
    secs: float

    def store(self, dest: Path) -> tuple[MemoryStore, Path]:
        """A new copy of this step's store in ``dest``, and the path of this step's snapshot in it."""
        store = MemoryStore(copy_store(self.db, dest))
        return store, store.paths.serving / self.snapshot


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Step]:
    """One store built five times, each build's state kept in a copy (``Step``); nothing is checked
    here, the tests check every step.
    base: the base rows and u2's marker (ZB), vars LAYERS: the first build publishes a base.
    share: one new memory of u1, vars SHARE: the delta would be past 1% of the base, so a base.
    d1: u0's recall events (strength changes at this build), a new memory of u2 (the forget's second
      marker) and u0's slot change (Paris supersedes Lyon), vars LAYERS: a delta over 1 layer.
    d2: u1's recall events, a new memory of u2, vars LAYERS: a delta over 2 layers.
    d3: nothing new, vars LAYERS: a delta of zero memories (strengths only) over 3 layers."""
    root = tmp_path_factory.mktemp("layers")
    store = MemoryStore(root / "build" / "s.duckdb")
    out: dict[str, Step] = {}

    def build(name: str, vars: dict[str, object]) -> None:
        snap, kind, secs = _build(store, vars)
        out[name] = Step(copy_store(store.paths.db, root / name), snap.name, kind, secs)

    _land(store, [*_base_rows(), ZB])
    build("base", LAYERS)
    _land(store, [("u1", "n1", "2026-03-08 09:00:00", "I prefer salsa dancing over most things.")])
    build("share", SHARE)
    for q in QUERIES:
        store.recall(q, user_id="u0", min_sim=0.0, record_access=True)
    _land(store, [("u2", "zd", "2026-03-08 09:00:00", "I prefer quixotical lemonade every evening."),
                  ("u0", "paris", "2026-03-08 10:00:00", "I moved to Paris.")])
    build("d1", LAYERS)
    for q in QUERIES:
        store.recall(q, user_id="u1", min_sim=0.0, record_access=True)
    _land(store, [("u2", "n2", "2026-03-09 09:00:00", "I prefer vinyl records over most things.")])
    build("d2", LAYERS)
    build("d3", LAYERS)
    store.close()
    return out


def test_deltas_serve_the_warehouse_and_recall_like_a_base(steps: dict[str, Step], tmp_path: Path) -> None:
    wh, base = steps["base"].store(tmp_path / "base")
    kind, base_secs = steps["base"].kind, steps["base"].secs
    assert kind.startswith("base (no previous snapshot)")
    assert [r[5] for r in _layers(base)] == ["base"]
    _assert_serves_warehouse(wh, base)

    # the base the deltas build on (compacted by share: test_compaction_prune_and_missing_layers)
    wh, base = steps["share"].store(tmp_path / "share")
    assert steps["share"].kind.startswith("base (")
    _assert_serves_warehouse(wh, base)
    base_ltm = {r[0]: r for r in _served(base, f"select {NON_STRENGTH}, (strength, access_count) from long_term_memory")}

    # recall events (strength changes at the next build), a new memory and a slot change
    store, d1 = steps["d1"].store(tmp_path / "d1")
    kind, delta_secs = steps["d1"].kind, steps["d1"].secs
    assert kind.startswith("delta"), kind
    layers = _layers(d1)
    assert [(r[0], r[5]) for r in layers] == [(0, "base"), (1, "delta")]
    assert layers[0][1] == base.name and layers[1][1] == d1.name
    _assert_serves_warehouse(store, d1)
    current = {r[0]: r for r in query(store, f"select {NON_STRENGTH}, (strength, access_count) from long_term_memory"
                                             " where valid_to is null")}
    # the delta holds exactly the current memories that are new or changed since the base ...
    changed = {m for m, r in current.items() if m not in base_ltm or base_ltm[m][:-1] != r[:-1]}
    delta_ids = {r[0] for r in _served(d1, "select memory_id from delta_memories")}
    assert changed and delta_ids == changed
    assert any("Paris" in current[m][4] for m in delta_ids)
    lyon = [m for m, r in base_ltm.items() if "Lyon" in r[4]]
    assert lyon and not set(lyon) & set(current), "the slot change did not supersede Lyon"
    # ... their term-index rows, and the light state of every current memory
    assert _served(d1, "select count(*) from delta_term_index")[0][0] == query(
        store, "select count(*) from memory_term_index where list_contains(?, memory_id)", [sorted(delta_ids)])[0][0]
    assert _served(d1, "select count(*) from memory_state")[0][0] == len(current)
    assert len(delta_ids) < len(current) / 4
    # strengths moved (access events) for memories the delta does not hold: served from memory_state
    moved = [m for m in current if m in base_ltm and m not in delta_ids and base_ltm[m][-1] != current[m][-1]]
    assert moved and any(base_ltm[m][-1][0] != current[m][-1][0] for m in moved)

    # a second delta on top of the first (recall events of u1 and a new memory), and a third
    # (nothing new): chains of 2 and 3 layers, below serving_max_layers (4)
    store, d2 = steps["d2"].store(tmp_path / "d2")
    assert steps["d2"].kind.startswith("delta") and [r[5] for r in _layers(d2)] == ["base", "delta", "delta"]
    _assert_serves_warehouse(store, d2)
    store, d3 = steps["d3"].store(tmp_path / "d3")
    assert steps["d3"].kind.startswith("delta") and [r[5] for r in _layers(d3)] == ["base", "delta", "delta", "delta"]
    _assert_serves_warehouse(store, d3)
    got = _recall_all(store)
    assert store.snapshot_path == d3 and store._reader.indexed

    # a base forced over the same warehouse state serves the same recall (index and compiled paths):
    # the chain has 4 layers, serving_max_layers
    b2, kind, _ = _build(store, LAYERS)
    assert kind.startswith("base (4 layers (serving_max_layers)"), kind
    _assert_serves_warehouse(store, b2)
    want = _recall_all(store)
    assert store.snapshot_path == b2
    assert any(group for group in got) and got == want
    print(f"publish hook: base {base_secs:.2f}s, delta {delta_secs:.2f}s")


def test_compaction_prune_and_missing_layers(steps: dict[str, Step], tmp_path: Path) -> None:
    # serving_max_layers: test_deltas_serve_the_warehouse_and_recall_like_a_base (chains of 1, 2
    # and 3 layers get a delta, one of 4 a base)
    # serving_compact_share: a delta of one new memory over a base of ~37 rows is past 1%
    # (--full-refresh publishes a base too: checked in test_incremental.py)
    wh, snap2 = steps["share"].store(tmp_path / "share")
    kind = steps["share"].kind
    assert kind.startswith("base (") and "serving_compact_share" in kind, kind
    _assert_serves_warehouse(wh, snap2)
    # no new messages: a delta of zero memories (strengths only)
    store, d3 = steps["d3"].store(tmp_path / "d3")
    assert steps["d3"].kind.startswith("delta") and _layers(d3)[-1][3] == 0

    # prune: keep the newest 3 snapshots and every layer they read (with its marker)
    chain = [store.paths.serving / snap2.name]  # the base compacted by share, in the copy of d3's store
    for name in ("d1", "d2", "d3"):
        assert steps[name].kind.startswith("delta")
        chain.append(store.paths.serving / steps[name].snapshot)
    names = set(os.listdir(store.paths.serving))
    for s in chain:  # the base is 4 snapshots old but read by every kept delta
        assert s.name in names and s.with_suffix(".ready").name in names
    assert [r[1] for r in _layers(chain[-1])] == [s.name for s in chain]
    assert steps["base"].snapshot not in names
    assert not [n for n in names if n.endswith(".duckdb") and n < chain[0].name], "older snapshots not pruned"
    assert chain[-1].with_suffix(".index").name in names
    assert chain[0].with_suffix(".index").name not in names, "the index of a snapshot kept only as a layer"
    fresh = MemoryStore(store.paths.db)  # a new reader answers from the newest delta
    assert fresh.recall(QUERIES[0], user_id="u0", min_sim=0.0, record_access=False)
    assert fresh.snapshot_path == chain[-1]
    fresh.close()

    # a snapshot whose layer file is gone is not served (the readers fall back, the next build
    # publishes a base)
    chain[1].unlink()
    with pytest.raises(SnapshotIncomplete):
        connect_snapshot(chain[-1]).close()
    fallback = MemoryStore(store.paths.db)
    assert fallback.recall(QUERIES[0], user_id="u0", min_sim=0.0, record_access=False)
    assert fallback.snapshot_path == chain[0]  # the newest complete snapshot
    fallback.close()
    chain[0].unlink()
    with pytest.raises(StoreNotBuilt):
        MemoryStore(store.paths.db).recall(QUERIES[0], user_id="u0", record_access=False)
    snap, kind, _ = _build(store, LAYERS)
    assert kind.startswith("base (layer file(s) missing"), kind
    _assert_serves_warehouse(store, snap)
    assert ready_snapshots(store.paths)[-1] == snap


def test_forget_leaves_nothing_in_any_layer(steps: dict[str, Step], tmp_path: Path) -> None:
    store, d3 = steps["d3"].store(tmp_path)
    d1 = store.paths.serving / steps["d1"].snapshot
    assert [r[5] for r in _layers(d3)] == ["base", "delta", "delta", "delta"] and _layers(d3)[1][1] == d1.name
    for marker in ("zanzibarian", "quixotical"):  # one in the base, one in the first delta
        assert any(marker in r[0] for r in _served(d3, "select content from long_term_memory where user_id = 'u2'"))

    store.forget(user_id="u2")
    serving = [f for f in store.paths.serving.rglob("*") if f.is_file()]
    for marker in ("zanzibarian", "quixotical"):  # the bytes of any file: tables, index, term postings
        assert not [f for f in files_containing(store, marker) if ".serving" in f], marker
    for f in serving:
        for marker in ("zanzibarian", "quixotical", "u2"):  # and every table's rows as text
            if f.name.endswith(".duckdb"):
                assert not tables_containing(f, marker), (f, marker)
    snap = ready_snapshots(store.paths)[-1]
    assert [r[5] for r in _layers(snap)] == ["base"]
    assert d1.name not in os.listdir(store.paths.serving)
    _assert_serves_warehouse(store, snap)
    # the next build publishes a delta over the purged base; still nothing of u2
    _land(store, [("u1", "n3", "2026-03-10 09:00:00", "I prefer rowing boats over most things.")])
    nxt, kind, _ = _build(store, LAYERS)
    assert kind.startswith("delta"), kind
    _assert_serves_warehouse(store, nxt)
    assert not [f for f in files_containing(store, "quixotical") if ".serving" in f]
    assert not _served(nxt, "select * from long_term_memory where user_id = 'u2'")
