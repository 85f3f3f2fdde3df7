"""agent-memory's recall shim: write to the session log, build, recall, format prompts.

    from recall_shim import MemoryStore
    store = MemoryStore("data/agent_memory.duckdb")
    store.remember("alice", "I prefer tables", session_id="s1")
    store.build()
    print(store.prompt(["how should I format answers?"], user_id="alice"))
    store.forget(user_id="alice")          # everywhere, with an audit record
"""

from recall_shim.errors import (
    AgentMemoryError,
    BackendUnavailable,
    BuildFailed,
    ConnectionFailed,
    ContentTooLong,
    DimensionMismatch,
    InvalidId,
    InvalidInput,
    InvalidQuery,
    InvalidStorePath,
    PermissionDenied,
    StorageFailure,
    StoreBusy,
    StoreNotBuilt,
    StoreNotMigrated,
    UnknownEmbeddingModel,
)
from recall_shim.forget.common import ForgetReport
from recall_shim.write.ids import normalise_id
from recall_shim.targets.postgres.local_server import LocalPostgres
from recall_shim.targets.postgres.server import PgConnection
from recall_shim.targets.postgres.store import PgMemoryStore
from recall_shim.recall.prompt import format_prompt
from recall_shim.serving.reader import RecalledMemory
from recall_shim.common.paths import package_version
from recall_shim.store import BuildResult, IngestReport, Store
from recall_shim.targets import open_store
from recall_shim.targets.duckdb import MemoryStore

__all__ = [
    "__version__",
    "MemoryStore",
    "PgMemoryStore",
    "Store",
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
    "ConnectionFailed",
    "ContentTooLong",
    "DimensionMismatch",
    "InvalidId",
    "InvalidInput",
    "InvalidQuery",
    "InvalidStorePath",
    "PermissionDenied",
    "StorageFailure",
    "StoreBusy",
    "StoreNotBuilt",
    "StoreNotMigrated",
    "UnknownEmbeddingModel",
]

__version__ = package_version()
