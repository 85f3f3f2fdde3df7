#!/usr/bin/env bash
# Set up, then run every check: SQL lint (sqlfluff), the full dbt build (models + data tests +
# unit tests) on a scratch store, and the pytest suite (real dbt builds on temporary stores, on
# DuckDB and on a throwaway PostgreSQL + pgvector server).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_WAIT_POLICY=passive DBT_SEND_ANONYMOUS_USAGE_STATS=false
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
echo "== sqlfluff lint"
bash scripts/lint.sh
echo "== dbt build on a scratch store with the demo log"
AGENT_MEMORY_DB="$scratch/ci.duckdb" .venv/bin/agent-memory ingest demo/session_log.jsonl --db "$scratch/ci.duckdb"
AGENT_MEMORY_DB="$scratch/ci.duckdb" DBT_TARGET_PATH="$scratch/target" DBT_LOG_PATH="$scratch/logs" \
  .venv/bin/dbt build --project-dir . --profiles-dir .
echo "== pytest (DuckDB suite; tests_py/test_postgres.py runs the PostgreSQL + pgvector suite on a"
echo "   server it starts from the pgserver wheel and stops afterwards: required here, not skipped)"
export AGENT_MEMORY_REQUIRE_POSTGRES=${AGENT_MEMORY_REQUIRE_POSTGRES:-1}
set +e
# two workers: the suite is dominated by dbt builds and embedding, which overlap well on 2 cores;
# a file's tests stay on one worker (module-scoped stores are built once, order within a file holds)
.venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-2}" --dist loadfile --durations=25 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
