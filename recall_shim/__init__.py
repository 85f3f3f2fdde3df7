"""agent-memory's recall shim: write to the session log, build, recall, format prompts.

    from recall_shim import MemoryStore
    store = MemoryStore("data/agent_memory.duckdb")
    store.remember("alice", "I prefer tables", session_id="s1")
    store.build()
    print(store.prompt(["how should I format answers?"], user_id="alice"))
    store.forget(user_id="alice")          # everywhere, with an audit record
"""

from ._errors import (
    AgentMemoryError,
    BackendUnavailable,
    BuildFailed,
    ContentTooLong,
    DimensionMismatch,
    InvalidId,
    InvalidInput,
    InvalidQuery,
    InvalidStorePath,
    StorageFailure,
    StoreBusy,
    StoreNotBuilt,
    UnknownEmbeddingModel,
)
from ._forget import ForgetReport
from ._ids import normalise_id
from ._pg import LocalPostgres, PgConnection
from ._pg_store import PgMemoryStore
from ._prompt import format_prompt
from ._serving import RecalledMemory
from ._store import BuildResult, IngestReport, MemoryStore
from ._targets import open_store

__all__ = [
    "MemoryStore",
    "PgMemoryStore",
    "open_store",
    "PgConnection",
    "LocalPostgres",
    "RecalledMemory",
    "IngestReport",
    "BuildResult",
    "ForgetReport",
    "format_prompt",
    "normalise_id",
    "AgentMemoryError",
    "BackendUnavailable",
    "BuildFailed",
    "ContentTooLong",
    "DimensionMismatch",
    "InvalidId",
    "InvalidInput",
    "InvalidQuery",
    "InvalidStorePath",
    "StorageFailure",
    "StoreBusy",
    "StoreNotBuilt",
    "UnknownEmbeddingModel",
]
