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
# the suite's stores share dbt's parse through a cache of this run's own (recall_shim/build/parse_cache.py)
export AGENT_MEMORY_PARSE_CACHE=${AGENT_MEMORY_PARSE_CACHE:-$scratch/dbt-parse}
# the lint and the demo build each use one core: they run side by side (the lint's output is
# printed once both are done; either failing fails the run)
bash scripts/lint.sh >"$scratch/lint.log" 2>&1 &
lint_pid=$!
echo "== dbt build on a scratch store with the demo log (sqlfluff lint runs beside it)"
build_rc=0
{ AGENT_MEMORY_DB="$scratch/ci.duckdb" .venv/bin/agent-memory ingest demo/session_log.jsonl --db "$scratch/ci.duckdb" \
  && AGENT_MEMORY_DB="$scratch/ci.duckdb" DBT_TARGET_PATH="$scratch/target" DBT_LOG_PATH="$scratch/logs" \
    .venv/bin/dbt build --project-dir . --profiles-dir .; } || build_rc=$?
lint_rc=0
wait "$lint_pid" || lint_rc=$?
echo "== sqlfluff lint"
cat "$scratch/lint.log"
if [ "$lint_rc" -ne 0 ] || [ "$build_rc" -ne 0 ]; then
  echo "sqlfluff lint (exit $lint_rc) or the dbt build of the demo log (exit $build_rc) failed" >&2
  exit 1
fi
echo "== pytest (DuckDB suite; tests_py/test_postgres.py runs the PostgreSQL + pgvector suite on a"
echo "   server it starts from the pgserver wheel and stops afterwards: required here, not skipped)"
export AGENT_MEMORY_REQUIRE_POSTGRES=${AGENT_MEMORY_REQUIRE_POSTGRES:-1}
set +e
# two workers: the suite is dominated by dbt builds and embedding, which overlap well on 2 cores;
# a file's tests stay on one worker (module-scoped stores are built once, order within a file holds).
# Files are handed out in collection order, which tests_py/conftest.py sorts slowest first
# (SLOW_FIRST), so no long file starts last while the other worker idles.
.venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder --durations=25 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
