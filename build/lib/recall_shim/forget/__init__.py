"""Forget and audit on DuckDB: the forget run, its journal (crash recovery), the purged re-publish of serving snapshots, and the id-only tombstones every build honours (both targets)."""
