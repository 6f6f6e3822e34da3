#!/usr/bin/env bash
# README command 2: set up (idempotent) and run the test suite.
#
#   bash scripts/test.sh [pytest arguments]
#
# Installs Debian's activemq if missing (the broker tests start private instances of it),
# creates .venv, installs nettel with its test extras and runs ruff, mypy and pytest (the tests
# and the packages' doctests) from the venv.
# Exits with pytest's status; "no tests collected" (5) counts as a failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/setup.sh
source scripts/setup.sh
install_system_packages chromium openssl  # the web view's e2e test; TLS client certificates
install_venv ".[test,training]"  # training: Keras parity and pipeline tests
install_promtool

# ---- test ----------------------------------------------------------------------------------
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy service models  # settings: pyproject.toml [tool.mypy]
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "test: pytest collected no tests; failing" >&2
fi
exit "$status"
