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

The same derivation is written in Jinja in ``macros/store_paths.sql``; keep them in step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from recall_shim.errors import InvalidInput, InvalidStorePath

EMPTY_MARKER = "_empty.jsonl"
PROJECT_ENV = "AGENT_MEMORY_PROJECT"


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
        return self._sibling(".inbox")

    @property
    def messages(self) -> Path:
        return self.inbox / "messages"

    @property
    def access(self) -> Path:
        return self.inbox / "access"

    @property
    def forget(self) -> Path:
        return self.inbox / "forget"

    @property
    def write_lock(self) -> Path:
        return self.inbox / ".write.lock"

    @property
    def audit(self) -> Path:
        return self._sibling(".audit.jsonl")

    @property
    def forget_journal(self) -> Path:
        return self._sibling(".forget-journal.json")

    @property
    def serving(self) -> Path:
        return self._sibling(".serving")

    @property
    def build_lock(self) -> Path:
        return self._sibling(".build.lock")

    @property
    def dbt_dir(self) -> Path:
        return self._sibling(".dbt")

    def ensure(self) -> "StorePaths":
        """Create the folders and the empty landing files that keep DuckDB's globs non-empty."""
        # what exists is left alone (not even its mtime), so a read-only store opens for reading
        for d in (self.db.parent, self.messages, self.access, self.forget, self.serving):
            if not d.is_dir():
                d.mkdir(parents=True, exist_ok=True)
        for d in (self.messages, self.access, self.forget):
            if not (d / EMPTY_MARKER).exists():
                (d / EMPTY_MARKER).touch(exist_ok=True)
        return self
