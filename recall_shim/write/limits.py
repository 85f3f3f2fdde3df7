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


MEMORY_MODEL = "long_term_memory"


@lru_cache(maxsize=8)
def _kinds(models_dir: str) -> tuple[str, ...]:
    import yaml  # a dependency of dbt-core

    for path in sorted(Path(models_dir).rglob("*.yml")):
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh) or {}
        for model in doc.get("models") or []:
            if model.get("name") != MEMORY_MODEL:
                continue
            for column in model.get("columns") or []:
                for test in column.get("data_tests") or [] if column.get("name") == "kind" else []:
                    accepted = test.get("accepted_values") if isinstance(test, dict) else None
                    if accepted:
                        return tuple((accepted.get("arguments") or accepted)["values"])
    raise LookupError(f"no accepted_values test on {MEMORY_MODEL}.kind under {models_dir}")


def memory_kinds() -> tuple[str, ...]:
    """The kinds a memory can have: the accepted_values test of ``long_term_memory.kind`` in the
    dbt project's models YAML (the contract every build checks), so there is no second list."""
    return _kinds(str(Path(project_dir()) / "models"))
