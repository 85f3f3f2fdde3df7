"""The door's limits, read from the store's configuration: the dbt vars ``max_content_chars``
and ``max_user_id_chars`` in ``dbt_project.yml`` (the same values staging checks), so there is no
second hard-coded copy. Read once per process per file version."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from recall_shim.common.paths import project_dir


@dataclass(frozen=True)
class DoorLimits:
    max_content_chars: int
    max_id_chars: int


@lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int) -> DoorLimits:
    import yaml  # a dependency of dbt-core

    with open(path, encoding="utf-8") as fh:
        vars_ = (yaml.safe_load(fh) or {}).get("vars") or {}
    return DoorLimits(max_content_chars=int(vars_["max_content_chars"]),
                      max_id_chars=int(vars_["max_user_id_chars"]))


def door_limits() -> DoorLimits:
    """The limits of the dbt project this process builds with (``project_dir()``)."""
    path = Path(project_dir()) / "dbt_project.yml"
    return _read(str(path), path.stat().st_mtime_ns)
