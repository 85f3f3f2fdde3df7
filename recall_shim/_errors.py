"""Exceptions raised by the recall shim. All derive from :class:`AgentMemoryError`."""

from __future__ import annotations


class AgentMemoryError(Exception):
    """Base class for every error the shim raises on purpose."""


class StoreNotBuilt(AgentMemoryError):
    """No published serving snapshot exists yet: run ``agent-memory build`` first."""


class DimensionMismatch(AgentMemoryError):
    """A vector's length differs from the store's configured embedding dimension."""


class InvalidQuery(AgentMemoryError):
    """A recall request is malformed (empty text, bad top_k, NaN in a vector, ...)."""


class InvalidInput(AgentMemoryError):
    """An ingest file or a remembered message cannot be read at all."""


class UnknownEmbeddingModel(AgentMemoryError):
    """The configured embedding model is not in the registry."""


class StoreBusy(AgentMemoryError):
    """Another process holds the warehouse file (an open DuckDB connection outside the shim)."""


class BuildFailed(AgentMemoryError):
    """``dbt build`` exited non-zero; its output is attached."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class BackendUnavailable(AgentMemoryError):
    """The PostgreSQL backend cannot be used: a package is missing or the server cannot start."""


class InvalidStorePath(InvalidInput):
    """A store path DuckDB cannot open as named: it holds a backslash (read as a folder separator),
    a ``?`` (read as the start of connection options) or a NUL character."""


class SnapshotIncomplete(StoreNotBuilt):
    """A published snapshot lists a layer file that is gone: it cannot be served."""
