"""Plain dbt sends no anonymous usage stats: the project file turns tracking off, so a `dbt`
command run by hand (no DBT_SEND_ANONYMOUS_USAGE_STATS in the environment) stays quiet."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from .conftest import ROOT


def test_project_file_turns_usage_stats_off() -> None:
    project = yaml.safe_load((ROOT / "dbt_project.yml").read_text(encoding="utf-8"))
    assert project["flags"]["send_anonymous_usage_stats"] is False


def test_plain_dbt_command_sends_nothing(tmp_path: Path) -> None:
    # a profiles folder of its own: dbt writes its tracking cookie (.user.yml) there when tracking is on
    shutil.copy(ROOT / "profiles.yml", tmp_path / "profiles.yml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env.update(AGENT_MEMORY_DB=str(tmp_path / "s.duckdb"), AGENT_MEMORY_INBOX=str(tmp_path / "s.inbox"),
               DBT_TARGET_PATH=str(tmp_path / "target"), DBT_LOG_PATH=str(tmp_path / "logs"))
    dbt = Path(sys.executable).with_name("dbt")
    # `dbt debug` reads the project's flags and starts tracking like any command, and writes nothing
    # into the project (its connection test opens the scratch store above)
    proc = subprocess.run([str(dbt), "debug", "--project-dir", str(ROOT), "--profiles-dir", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = (tmp_path / "logs" / "dbt.log").read_text(encoding="utf-8")
    assert "Running with dbt=" in log  # the debug log was written
    assert "Sending event" not in log
    assert not (tmp_path / ".user.yml").exists()
