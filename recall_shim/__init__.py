"""agent-memory recall shim."""
