#!/usr/bin/env bash
# Lint the project's SQL with sqlfluff (dbt templater, duckdb dialect; rules in .sqlfluff).
# Assumes scripts/setup.sh ran. The templater compiles the project against a scratch store.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
AGENT_MEMORY_DB="$scratch/lint.duckdb" DBT_TARGET_PATH="$scratch/target" DBT_LOG_PATH="$scratch/logs" \
  .venv/bin/sqlfluff lint models analyses snapshots tests/singular --processes 1 "$@"
