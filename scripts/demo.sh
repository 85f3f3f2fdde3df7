#!/usr/bin/env bash
# Set up, then run the demo on the embedded default store (data/agent_memory.duckdb):
# ingest demo/session_log.jsonl, dbt build, recall the reference design's three questions,
# print the system-prompt block.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_WAIT_POLICY=passive
.venv/bin/agent-memory demo "$@"
