"""Rule extraction on PostgreSQL: the same rows as on DuckDB for a multilingual sample (the
everyday probes' 514 English and Chinese messages: clauses, slots, lists, time expressions), and
the plan tries each rule's pattern against all clauses in one pass (macros/dialect.sql,
rule_major_join: PostgreSQL caches only 32 compiled patterns, so a rule-inside loop recompiled
every pattern for every clause, 11-19 ms per message)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from recall_shim import LocalPostgres, MemoryStore, PgMemoryStore

from .conftest import ROOT, query, start_postgres

SAMPLE = ROOT / "benchmarks" / "recall_quality" / "probes" / "everyday.json"
COLUMNS = ("extraction_id, message_id, user_id, rule_id, kind, slot, entity, polarity, content, happened_on,"
           " happened_grain")


def sample_rows() -> list[dict[str, Any]]:
    data = json.loads(SAMPLE.read_text(encoding="utf-8"))
    rows = []
    for user in data["users"]:
        for session in user["sessions"]:
            start = dt.datetime.fromisoformat(session["started_at"])
            for i, m in enumerate(session["messages"]):
                rows.append({"user_id": user["user_id"], "session_id": session["session_id"], "msg_seq": i,
                             "role": m["role"], "content": m["content"], "message_id": m["id"],
                             "ts": (start + dt.timedelta(minutes=i)).strftime("%Y-%m-%d %H:%M:%S")})
    # months of the year with and without the year written (year_in_text, one macro per dialect)
    for i, text in enumerate(["I moved to Lisbon in March 2024.", "我5月从厦门搬到了福州。",
                              "we moved to Oslo in early may"]):
        rows.append({"user_id": "months", "session_id": "months-1", "msg_seq": i, "role": "user", "content": text,
                     "message_id": f"months-{i}", "ts": f"2026-06-0{i + 1} 09:00:00"})
    return rows


def dbt_run(env: dict[str, str], target: str, work: Path) -> None:
    dbt = Path(sys.executable).with_name("dbt")
    out = subprocess.run([str(dbt) if dbt.exists() else "dbt", "build", "--select", "+int_memories_extracted",
                          "--indirect-selection", "cautious", "--exclude", "test_type:unit", "--target", target, "--project-dir", str(ROOT), "--profiles-dir", str(ROOT)],
                         cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, **env, "DBT_TARGET_PATH": str(work / "target"),
                              "DBT_LOG_PATH": str(work / "logs"), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, MemoryStore, Path]]:
    work = tmp_path_factory.mktemp("pg_extraction")
    server = LocalPostgres(work / "data")
    conn = start_postgres(server)
    try:
        rows = sample_rows()
        PgMemoryStore(conn, work_dir=work / "pg-work").remember_many(rows)
        dbt_run(conn.dbt_env(), "postgres", work / "pg-dbt")
        duck = MemoryStore(work / "duck" / "store.duckdb")
        duck.remember_many(rows)
        dbt_run({"AGENT_MEMORY_DB": str(duck.paths.db)}, "duckdb", work / "duck-dbt")
        yield conn, duck, work
    finally:
        server.stop()


def test_extractions_equal_duckdb_on_a_multilingual_sample(both: tuple[Any, MemoryStore, Path]) -> None:
    conn, duck, _ = both
    with conn.connect() as con:
        pg = sorted(con.execute(f"select {COLUMNS} from {conn.schema}.int_memories_extracted").fetchall())
    dk = sorted(query(duck, f"select {COLUMNS} from int_memories_extracted"))
    assert sorted(set(pg) - set(dk)) == sorted(set(dk) - set(pg)) == [] and pg == dk
    assert len(pg) > 60
    kinds = {r[4] for r in pg}
    assert {"fact", "preference"} <= kinds
    assert sum(r[9] is not None for r in pg) >= 5  # time expressions resolved
    months = {r[8]: str(r[9]) for r in pg if r[2] == "months"}
    assert months["User lives in Lisbon"] == "2024-03-01" and months["用户住在福州"] == "2026-05-01"
    assert months["User lives in Oslo"] == "2026-05-01"   # "in early may", the message's year
    assert sum(r[5] is not None for r in pg) >= 30  # slots
    assert any("\u4e00" <= ch <= "\u9fff" for r in pg for ch in r[8])  # Chinese rules fired


def test_each_rule_pattern_is_tried_in_one_pass(both: tuple[Any, MemoryStore, Path]) -> None:
    """The compiled model's plan on PostgreSQL: the extraction rules and the time expressions are
    each scanned once (the outer side), the clauses once per rule (the inner side)."""
    conn, _, work = both
    sql = next((work / "pg-dbt" / "target" / "compiled").rglob("int_memories_extracted.sql")).read_text()
    with conn.connect() as con:
        plan = "\n".join(r[0] for r in con.execute("explain (analyze, costs off, timing off) " + sql).fetchall())
    rules = [line for line in plan.splitlines() if "Seq Scan on extraction_rules" in line]
    times = [line for line in plan.splitlines() if "Seq Scan on time_expressions" in line]
    assert len(rules) == 1 and "loops=1)" in rules[0], plan
    assert len(times) == 1 and "loops=1)" in times[0], plan
