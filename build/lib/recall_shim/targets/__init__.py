"""Stores per target: DuckDB (the embedded default, MemoryStore) and PostgreSQL + pgvector (PgMemoryStore)."""
