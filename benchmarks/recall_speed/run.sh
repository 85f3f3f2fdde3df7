#!/usr/bin/env bash
# One command: bash benchmarks/recall_speed/run.sh [--sizes 100000,1000000] [--dim 1536] [--quick] [--target postgres]
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_WAIT_POLICY=passive DBT_SEND_ANONYMOUS_USAGE_STATS=false
exec .venv/bin/python -m benchmarks.recall_speed "$@"
