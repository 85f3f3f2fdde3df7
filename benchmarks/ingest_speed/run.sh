#!/usr/bin/env bash
# One command: bash benchmarks/ingest_speed/run.sh [--sizes 100000,1000000] [--increment 10000] [--user-size 100] [--quick]
# then the decay fold at scale: .venv/bin/python -m benchmarks.ingest_speed.decay
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_WAIT_POLICY=passive DBT_SEND_ANONYMOUS_USAGE_STATS=false
exec .venv/bin/python -m benchmarks.ingest_speed "$@"
