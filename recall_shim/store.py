"""The Store protocol both targets implement and the values they share.

A store is DuckDB (the embedded default, ``recall_shim.targets.duckdb.MemoryStore``: a DuckDB file,
``--db`` / $AGENT_MEMORY_DB) or PostgreSQL + pgvector (``recall_shim.targets.postgres.store.PgMemoryStore``,
named by the AGENT_MEMORY_PG_* variables the dbt profile reads; docs/scaling_out.md); ``open_store``
(recall_shim/targets) picks one. Everything that serves a caller (CLI, HTTP, MCP, LangGraph) is
written against :class:`Store`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, NamedTuple, Protocol, Sequence

import numpy as np

from recall_shim.common.embedding import embed_texts
from recall_shim.errors import DimensionMismatch, InvalidId, InvalidQuery
from recall_shim.recall.prompt import format_prompt
from recall_shim.serving.reader import RecalledMemory, RecallSettings
from recall_shim.write.ids import normalise_id
from recall_shim.write.limits import memory_kinds

if TYPE_CHECKING:
    from recall_shim.forget.common import ForgetReport

__all__ = ["Store", "Query", "IngestReport", "BuildResult", "RecallArgs", "recall_arguments", "scope_id",
           "query_vectors", "check_query_vector"]

Query = str | Sequence[float] | np.ndarray


def scope_id(value: Any, name: str, *, required: bool) -> str | None:
    """A user/agent/session scope under the one id rule (recall_shim/write/ids.py), NFC-normalised
    like every stored id, or InvalidId (an InvalidQuery): an id that no stored row can have is
    refused instead of silently matching nothing or another user. None when not ``required``."""
    if value is None:
        if required:
            raise InvalidId(f"{name} is required: recall is always scoped to one user", f"invalid_{name}")
        return None
    return normalise_id(value, name)


class RecallArgs(NamedTuple):
    top_k: int
    min_sim: float
    user_id: str
    agent_id: str | None
    session_id: str | None


def recall_arguments(queries: Any, settings: RecallSettings, *, user_id: Any, top_k: Any, min_sim: Any,
                     kinds: Any, agent_id: Any, session_id: Any) -> RecallArgs:
    """Check a recall's arguments against a store's settings (shared by every store type):
    returns them with the defaults applied and the ids normalised, or raises InvalidQuery."""
    user = scope_id(user_id, "user_id", required=True)
    agent = scope_id(agent_id, "agent_id", required=False)
    session = scope_id(session_id, "session_id", required=False)
    if isinstance(queries, (str, np.ndarray)) or not isinstance(queries, Sequence):
        raise InvalidQuery("queries must be a list of query texts or vectors")
    k = settings.default_top_k if top_k is None else top_k
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= settings.max_top_k:
        raise InvalidQuery(f"top_k must be an integer from 1 to {settings.max_top_k}, got {k!r}")
    ms = settings.default_min_sim if min_sim is None else min_sim
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not -1.0 <= float(ms) <= 1.0:
        raise InvalidQuery(f"min_sim must be a number from -1 to 1, got {ms!r}")
    if kinds is not None:
        if isinstance(kinds, str) or not all(isinstance(x, str) and x for x in kinds):
            raise InvalidQuery("kinds must be a list of kind names")
        for x in kinds:
            scope_id(x, "kind", required=True)
        unknown = sorted(set(kinds) - set(memory_kinds()))
        if unknown:
            raise InvalidQuery(f"unknown kind{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                               f"the kinds are {', '.join(memory_kinds())}")
    return RecallArgs(k, float(ms), user, agent, session)  # type: ignore[arg-type]


def check_query_vector(vec: Any, dim: int) -> list[float]:
    """A query vector as floats, or InvalidQuery / DimensionMismatch: ``dim`` numbers, finite, within
    float32 (the stores' FLOAT) and not all zeros (a zero vector has no direction: its cosine is NaN)."""
    try:
        arr = np.asarray(vec, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InvalidQuery(f"query vector is not a list of numbers: {exc}") from None
    if arr.shape[0] != dim:
        raise DimensionMismatch(f"query vector has {arr.shape[0]} dimensions, the store uses {dim}")
    if not np.all(np.isfinite(arr)):
        raise InvalidQuery("query vector contains NaN or infinity")
    with np.errstate(over="ignore", under="ignore"):
        arr32 = arr.astype(np.float32)
    if not np.all(np.isfinite(arr32)):
        raise InvalidQuery("query vector has values beyond the FLOAT (float32) range")
    if not np.any(arr32):
        raise InvalidQuery("query vector is all zeros (it has no direction to compare)")
    return [float(x) for x in arr]


def query_vectors(queries: Sequence[Query], settings: RecallSettings,
                  given: Sequence[Any] | None = None) -> list[list[float]]:
    """The queries' vectors (shared by every store type): texts checked (not empty, at most
    var recall_max_query_chars, valid Unicode) and embedded with the build's model and query form,
    or taken from ``given`` (aligned with ``queries``) when the caller embedded them already;
    vectors checked by :func:`check_query_vector`."""
    texts = [q for q in queries if isinstance(q, str)]
    for t in texts:
        if not t.strip():
            raise InvalidQuery("query text is empty")
        if len(t) > settings.max_query_chars:
            raise InvalidQuery(f"query text has {len(t)} characters; the limit is {settings.max_query_chars}"
                               " (var recall_max_query_chars)")
        try:
            t.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidQuery("query text is not valid Unicode (lone surrogate)") from None
    if given is not None and len(given) != len(queries):
        raise InvalidQuery(f"{len(given)} precomputed vectors for {len(queries)} queries")
    if given is not None:
        embedded = iter([g for g, q in zip(given, queries) if isinstance(q, str)])
    else:
        embedded = iter(embed_texts(settings.embedding_model, settings.embedding_query_form, texts) if texts else ())
    return [check_query_vector(next(embedded) if isinstance(q, str) else q, settings.embedding_dim) for q in queries]


@dataclass(frozen=True)
class IngestReport:
    """What ``ingest`` did with one file. ``rows`` counts every row landed (what the next build
    puts in session_messages or session_log_rejects); ``refused`` counts, by reason, the rows
    among them the door refused (they land only as rejects, their content cut to the limit)."""

    file: str
    rows: int
    landing_file: str | None
    skipped: bool = False
    refused: Mapping[str, int] = field(default_factory=dict)

    @property
    def accepted(self) -> int:
        """Rows that passed the door (staging may still reject some: session_log_rejects)."""
        return self.rows - sum(self.refused.values())


@dataclass(frozen=True)
class BuildResult:
    snapshot: str | None
    output: str
    seconds: float
    index: dict[str, Any] | None = None  # what the serving index update did (None: no index)
    skipped: bool = False  # nothing the build reads changed since the last one (no dbt run)


class Store(Protocol):
    """What every store offers (MemoryStore on DuckDB, PgMemoryStore on PostgreSQL). ``recall``,
    ``prompt`` and the context manager are defined here once, over ``recall_many`` and ``close``."""

    def remember(self, user_id: str, content: str, *, role: str = "user", session_id: str = "default",
                 msg_seq: int | None = None, ts: str | None = None, message_id: str | None = None,
                 agent_id: str | None = None) -> str:
        """Land one message durably (before this returns); returns its message_id."""
        ...

    def remember_many(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Land many session-log rows as one write; returns how many landed."""
        ...

    def ingest(self, path: str | os.PathLike[str], *, force: bool = False) -> IngestReport:
        """Bulk-load a CSV, JSONL or Parquet file of session-log rows."""
        ...

    def build(self, *, full_refresh: bool = False, vars: Mapping[str, Any] | None = None,
              select: str | None = None, command: str = "build") -> BuildResult:
        """Run the dbt build for this store and publish what recall reads."""
        ...

    def recall_many(self, queries: Sequence[Query], *, user_id: str, top_k: int | None = None,
                    min_sim: float | None = None, kinds: Sequence[str] | None = None,
                    record_access: bool = False, agent_id: str | None = None,
                    session_id: str | None = None, vectors: Sequence[Any] | None = None) -> list[list[RecalledMemory]]:
        """The best memories of ``user_id`` per query (several intents in one statement). A look:
        nothing is logged as an access unless ``record_access`` is true."""
        ...

    def similarity_distribution(self, queries: Sequence[Query], *, user_id: str) -> list[float]:
        """Cosines of ``queries`` against every current memory of ``user_id`` (threshold guidance)."""
        ...

    def forget(self, *, user_id: str | None = None, memory_id: str | None = None,
               actor: str | None = None) -> ForgetReport:
        """Forget a whole user or one memory everywhere the store keeps it, with an audit record."""
        ...

    @property
    def snapshot_path(self) -> Path | None:
        """The published snapshot recall reads (None where recall reads live tables)."""
        ...

    def close(self) -> None:
        ...

    def recall(self, query: Query, *, user_id: str, **kwargs: Any) -> list[RecalledMemory]:
        """Recall the best memories of ``user_id`` for one query text or vector."""
        return self.recall_many([query], user_id=user_id, **kwargs)[0]

    def prompt(self, queries: Sequence[Query], *, user_id: str, budget_chars: int = 1200, **kwargs: Any) -> str:
        """Recall for ``queries`` and format the memories as a system-prompt block. A use: the
        memories recalled for the block are logged as accesses (they reinforce at the next build)
        unless ``record_access=False``."""
        kwargs.setdefault("record_access", True)
        results = self.recall_many(queries, user_id=user_id, **kwargs)
        return format_prompt([m for group in results for m in group], budget_chars=budget_chars)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
