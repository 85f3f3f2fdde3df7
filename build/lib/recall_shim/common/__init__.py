"""Foundations every layer uses: where a store's files live (paths), file locks, the one place Python quotes SQL text, and the embedding model registry."""
