"""Decay at scale: the compiled ``int_memory_strength`` model over synthetic memories and access
events, ``python -m benchmarks.ingest_speed.decay [--sizes 100000:1000000,1000000:10000000]``.

The SQL is the model as dbt compiles it (``dbt compile --select int_memory_strength``), run
against generated ``int_memories_consolidated`` / ``stg_recall_events`` tables, so the timing is
the decay-and-reinforce fold itself, at sizes no embedding run could reach here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[2]


def compiled_strength_sql(work: Path) -> str:
    env = dict(os.environ, AGENT_MEMORY_DB=str(work / "c.duckdb"), DBT_TARGET_PATH=str(work / "target"),
               DBT_LOG_PATH=str(work / "logs"), DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    dbt = Path(sys.executable).with_name("dbt")
    subprocess.run([str(dbt) if dbt.exists() else "dbt", "compile", "--select", "int_memory_strength",
                    "--project-dir", str(ROOT), "--profiles-dir", str(ROOT), "--vars", json.dumps({"as_of": "2026-07-01"})],
                   cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    sql = (work / "target" / "compiled" / "agent_memory" / "models" / "intermediate" / "int_memory_strength.sql").read_text()
    sql = re.sub(r'"[^"]+"\."main"\."int_memories_consolidated"', "mem", sql)
    return re.sub(r'"[^"]+"\."main"\."stg_recall_events"', "ev", sql)


def run(con: duckdb.DuckDBPyConnection, sql: str, memories: int, events: int) -> float:
    con.execute("drop table if exists mem; drop table if exists ev; drop table if exists out")
    con.execute(f"""create table mem as select 'mem_' || i as memory_id,
        timestamp '2026-01-01' + to_seconds(i % 10000000) as created_at,
        [timestamp '2026-01-01' + to_seconds(i % 10000000)] as mentioned_at from range({memories}) t(i)""")
    con.execute(f"""create table ev as select 'e' || i as event_id, 'mem_' || (hash(i) % {memories}) as memory_id,
        timestamp '2026-04-20' + to_seconds(hash(i * 7) % 5000000) as accessed_at from range({events}) t(i)""")
    t = time.perf_counter()
    con.execute(f"create table out as {sql}")
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ingest_speed.decay", description=__doc__)
    ap.add_argument("--sizes", default="100000:1000000,1000000:10000000", help="memories:events pairs")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        sql = compiled_strength_sql(Path(tmp))
        con = duckdb.connect(str(Path(tmp) / "decay.duckdb"))
        print("| memories | access events | strength fold s | events/s |")
        print("|---:|---:|---:|---:|")
        for pair in a.sizes.split(","):
            m, e = (int(x) for x in pair.split(":"))
            secs = run(con, sql, m, e)
            print(f"| {m:,} | {e:,} | {secs:.1f} | {e / secs:,.0f} |", flush=True)
        con.close()


if __name__ == "__main__":
    main()
