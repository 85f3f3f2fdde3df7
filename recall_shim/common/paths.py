"""Where a store's files live. One DuckDB path names a whole store:

    <stem>.duckdb            the warehouse: written only by ``dbt build`` (one builder at a time)
    <stem>.inbox/messages/   immutable JSONL landing files, one per write (session log rows)
    <stem>.inbox/access/     immutable JSONL landing files of recall access events
    <stem>.inbox/forget/     forget tombstones (ids only, never content)
    <stem>.inbox/.write.lock writers hold it shared while landing; forget holds it exclusively
    <stem>.serving/          published read-only snapshots ``snap-*.duckdb`` + ``.ready`` markers
    <stem>.build.lock        serialises builds
    <stem>.dbt/              dbt's target/ and logs/ for this store
    <stem>.audit.jsonl       one line per forget: what, when, by whom, counts (never content)
    <stem>.forget-journal.json  the forget in progress (ids only; gone once it completed)

Those names are defined once, as var ``store_layout`` in the project's ``dbt_project.yml``:
the macros (``macros/store_paths.sql``) read it through ``name_map_var`` and this module reads
the same file (``store_layout()``), so neither side holds a copy.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from recall_shim.errors import InvalidInput, InvalidStorePath

PROJECT_ENV = "AGENT_MEMORY_PROJECT"
#: vars both sides read from dbt_project.yml: a run's --vars must not change them (the shim would disagree)
CONTRACT_VARS = frozenset({"store_layout"})


# a wheel carries a copy of the dbt project in recall_shim/project/ (setup.py says which files)
_PACKAGE = Path(__file__).resolve().parents[1]


def _checkout() -> Path | None:
    """The git checkout this package runs from (an editable install), if any."""
    root = _PACKAGE.parent
    return root if (root / "dbt_project.yml").is_file() and (root / "recall_shim").is_dir() else None


def project_dir() -> Path:
    """The dbt project: $AGENT_MEMORY_PROJECT, else the checkout this package runs from, else the
    copy an installed wheel carries (recall_shim/project/)."""
    env = os.environ.get(PROJECT_ENV)
    candidates = [Path(env)] if env else []
    candidates += [c for c in (_checkout(), _PACKAGE / "project") if c is not None]
    for c in candidates:
        if (c / "dbt_project.yml").is_file():
            return c.resolve()
    raise InvalidInput(
        "cannot find the dbt project (dbt_project.yml); set AGENT_MEMORY_PROJECT to the checkout"
    )


def package_version() -> str:
    """The installed distribution's version (pyproject.toml), or "unknown" outside an install."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-memory")
    except PackageNotFoundError:
        return "unknown"


def data_dir() -> Path:
    """Where default stores live: ``data/`` of the checkout when running from one, else the
    per-user data folder (``platformdirs.user_data_dir("agent-memory")``, e.g.
    ~/.local/share/agent-memory). The one default for the CLI and the Python API."""
    root = _checkout()
    if root is not None:
        return root / "data"
    import platformdirs

    return Path(platformdirs.user_data_dir("agent-memory", appauthor=False))


@lru_cache(maxsize=8)
def _read_vars(path: str, mtime_ns: int) -> dict[str, Any]:
    import yaml  # a dependency of dbt-core

    with open(path, encoding="utf-8") as fh:
        return dict((yaml.safe_load(fh) or {}).get("vars") or {})


def project_vars() -> dict[str, Any]:
    """The vars of the project's ``dbt_project.yml`` as written there (re-read when it changes)."""
    path = project_dir() / "dbt_project.yml"
    return _read_vars(str(path), path.stat().st_mtime_ns)


@dataclass(frozen=True)
class StoreLayout:
    """The names beside a store's warehouse file: var ``store_layout`` of ``dbt_project.yml``
    (suffixes of the stem, names inside the inbox and the serving folder)."""

    inbox: str
    serving: str
    build_lock: str
    dbt: str
    audit: str
    forget_journal: str
    write_lock: str
    empty_marker: str
    messages: str
    access: str
    forget: str
    snapshot_prefix: str
    ready: str
    manifest: str


# a file name, never . or .. (the same pattern as the var's rule in macros/vars.sql)
_LAYOUT_NAME = re.compile(r"(?![.]{1,2}$)[A-Za-z0-9_.-]{1,64}")


def store_layout() -> StoreLayout:
    """The project's store layout; InvalidInput when var store_layout is missing or malformed
    (macros/vars.sql checks the same var the same way at every dbt run)."""
    raw = project_vars().get("store_layout")
    names = [f.name for f in fields(StoreLayout)]
    if not isinstance(raw, dict) or sorted(raw) != sorted(names) or not all(
            isinstance(raw[n], str) and _LAYOUT_NAME.fullmatch(raw[n]) for n in names):
        raise InvalidInput(f"var store_layout in {project_dir() / 'dbt_project.yml'} must map exactly {', '.join(names)}"
                           " to file names")
    return StoreLayout(**{n: raw[n] for n in names})


# DuckDB reads a backslash as a folder separator and ? as the start of options in every file it opens
# (the warehouse, ATTACH, read_json), so a store under such a name cannot work; the same rule is
# var store_path's in macros/vars.sql. Quotes, spaces, %, *, [ and any Unicode are fine: paths reach
# SQL only through recall_shim/common/sql.py and the sql_literal / glob_escape macros.
_UNOPENABLE = {"\\": "a backslash", "?": "a ?", "\x00": "a NUL character"}


def check_store_path(path: Path) -> Path:
    """``path`` unchanged, or InvalidStorePath when DuckDB could not open a store there."""
    for ch, what in _UNOPENABLE.items():
        if ch in str(path):
            raise InvalidStorePath(f"store path {str(path)[:200]!r} holds {what}, which DuckDB cannot open as a file"
                                   " name (it reads \\ as a separator and ? as options); choose another folder")
    return path


@dataclass(frozen=True)
class StorePaths:
    db: Path
    layout: StoreLayout = field(default_factory=store_layout, compare=False, repr=False)

    @classmethod
    def of(cls, db: str | Path) -> "StorePaths":
        return cls(check_store_path(Path(check_store_path(Path(db))).expanduser().resolve()))

    @property
    def stem(self) -> Path:
        return self.db.with_suffix("") if self.db.suffix == ".duckdb" else self.db

    def _sibling(self, suffix: str) -> Path:
        return self.stem.with_name(self.stem.name + suffix)

    @property
    def inbox(self) -> Path:
        return self._sibling(self.layout.inbox)

    @property
    def messages(self) -> Path:
        return self.inbox / self.layout.messages

    @property
    def access(self) -> Path:
        return self.inbox / self.layout.access

    @property
    def forget(self) -> Path:
        return self.inbox / self.layout.forget

    @property
    def write_lock(self) -> Path:
        return self.inbox / self.layout.write_lock

    @property
    def audit(self) -> Path:
        return self._sibling(self.layout.audit)

    @property
    def forget_journal(self) -> Path:
        return self._sibling(self.layout.forget_journal)

    @property
    def serving(self) -> Path:
        return self._sibling(self.layout.serving)

    @property
    def build_lock(self) -> Path:
        return self._sibling(self.layout.build_lock)

    @property
    def dbt_dir(self) -> Path:
        return self._sibling(self.layout.dbt)

    def ensure(self) -> "StorePaths":
        """Create the folders and the empty landing files that keep DuckDB's globs non-empty."""
        # what exists is left alone (not even its mtime), so a read-only store opens for reading
        for d in (self.db.parent, self.messages, self.access, self.forget, self.serving):
            if not d.is_dir():
                d.mkdir(parents=True, exist_ok=True)
        for d in (self.messages, self.access, self.forget):
            if not (d / self.layout.empty_marker).exists():
                (d / self.layout.empty_marker).touch(exist_ok=True)
        return self
