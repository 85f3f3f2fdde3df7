"""What a build reads, as one fingerprint: a plain ``build`` whose inputs are unchanged since the
last completed build, and whose decay is recent enough, does nothing (issue 17 "cheap builds").

A build reads the landing files (messages, access events, forget requests), the dbt project
(models, macros, seeds, snapshots, ``dbt_project.yml``), the settings in the environment
(``AGENT_MEMORY_*``, ``DBT_*``: LLM extraction, the target) and the warehouse file. The fingerprint
lists each file's name, size and modification time; it is taken before dbt starts (the inbox and
the project: anything landed during a build differs next time) and after it (the warehouse, which
the build itself rewrites). The record is written only after a build that published a snapshot,
so a failed or interrupted build never makes the next one skip.

What is not an input: the clock. Strength decays with time, so an unchanged store is rebuilt once
the last build is older than var ``unchanged_build_max_age_hours`` (24: decay current for the
day; 0 never skips)."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from recall_shim.common.paths import StorePaths, package_version, project_dir, project_vars

RECORD = "last_build.json"
UNCHANGED_NOTE = ("nothing to build: no message, access event or forget landed, the project and the warehouse "
                  "are unchanged since the last build, and its decay is current (var unchanged_build_max_age_hours)")
ENV_PREFIXES = ("AGENT_MEMORY_", "DBT_")
PROJECT_PARTS = ("models", "macros", "seeds", "snapshots", "tests", "dbt_project.yml", "profiles.yml")
# a build over a warehouse whose seeds the last build loaded from this same project: models,
# snapshots and every data test with a model, snapshot or source among its parents (dbt's eager
# indirect selection); left out are the seeds and the tests that read only seeds or no relation
SEEDS_CURRENT_SELECT = ["--select", "resource_type:model", "resource_type:snapshot", "resource_type:source"]


def _listing(root: Path) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime_ns) of every file below ``root`` (``root`` itself if a file)."""
    if root.is_file():
        st = root.stat()
        return [(root.name, st.st_size, st.st_mtime_ns)]
    rows: list[tuple[str, int, int]] = []
    for folder, _, files in os.walk(root):
        for name in files:
            p = Path(folder, name)
            try:
                st = p.stat()
            except FileNotFoundError:  # pruned while listed: the next listing differs anyway
                continue
            rows.append((str(p.relative_to(root)), st.st_size, st.st_mtime_ns))
    return sorted(rows)


def _digest(rows: object) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def inputs_before(paths: StorePaths) -> dict[str, str]:
    """The fingerprint of what a build is about to read: the inbox and the dbt project."""
    proj = project_dir()
    return {
        "inbox": _digest(_listing(paths.inbox)) if paths.inbox.exists() else "",
        "project": _digest([package_version(), str(proj), [(part, _listing(proj / part)) for part in PROJECT_PARTS
                                                            if (proj / part).exists()]]),
        # the settings dbt and the build's Python read from the environment (LLM extraction, target)
        "environment": _digest(sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIXES))),
    }


def warehouse_after(paths: StorePaths) -> str:
    """The warehouse file as the build left it (any later write to it means: build again)."""
    return _digest(_listing(paths.db)) if paths.db.exists() else ""


def record_build(paths: StorePaths, before: dict[str, str], snapshot: Path, *, seeds: bool) -> None:
    """Remember what the build that published ``snapshot`` read (caller holds the build lock);
    ``seeds``: the warehouse's seeds are this project's (the build loaded them, or they were
    current already: a ``--select`` build leaves them as they were)."""
    record = {**before, "warehouse": warehouse_after(paths), "snapshot": snapshot.name, "seeds": seeds,
              "at": datetime.now(timezone.utc).isoformat()}
    path = paths.dbt_dir / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, path)


def drop_build_record(paths: StorePaths) -> None:
    """Drop the record (a build that did not publish must not let the next one skip)."""
    (paths.dbt_dir / RECORD).unlink(missing_ok=True)


def _last_record(paths: StorePaths) -> dict:
    """The record of the last build that published ({} when there is none or it is unreadable)."""
    try:
        record = json.loads((paths.dbt_dir / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _same_as_recorded(record: dict, before: dict[str, str], keys: Iterable[str], paths: StorePaths) -> bool:
    """``before``'s ``keys`` and the warehouse file are as the recorded build left them."""
    return all(record.get(k) == before[k] for k in keys) and record.get("warehouse") == warehouse_after(paths)


def seeds_current(paths: StorePaths, before: dict[str, str]) -> bool:
    """Whether the last build loaded the seeds of this same project, in this environment, and
    nothing wrote to the warehouse since: then the seeds, and the data tests that read nothing but
    seeds (or no relation: the seed-fidelity checks of the macros), would give the same again,
    whatever the run's vars. Only the clock-free part of the record counts (no age limit)."""
    record = _last_record(paths)
    return record.get("seeds") is True and _same_as_recorded(record, before, ("project", "environment"), paths)


def unchanged_since_last_build(paths: StorePaths, before: dict[str, str]) -> Path | None:
    """The snapshot of the last build when nothing it read has changed since and it is younger
    than var ``unchanged_build_max_age_hours``; else None (build)."""
    max_age = float(project_vars().get("unchanged_build_max_age_hours") or 0)
    record = _last_record(paths)
    try:
        age_hours = (datetime.now(timezone.utc) - datetime.fromisoformat(record["at"])).total_seconds() / 3600
        snapshot = paths.serving / str(record["snapshot"])
    except (ValueError, KeyError, TypeError):
        return None
    if not (0 <= age_hours < max_age) or not snapshot.exists():
        return None
    return snapshot if _same_as_recorded(record, before, before.keys(), paths) else None
