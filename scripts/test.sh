#!/usr/bin/env bash
# README command 2: set up (idempotent) and run the test suite.
#
#   bash scripts/test.sh [pytest arguments]
#
# Installs Debian's activemq and rabbitmq-server if missing (the broker tests start private
# instances of both on ports of their own; the rabbitmq-server package may start its system node
# on 5672 as well, which the tests leave alone), creates .venv, installs nettel with its test
# extras (and, in .venv-rucio, the Rucio server the rucio-sync tests start) and runs ruff, mypy and pytest (the tests and the packages' doctests) from the venv.
# Exits with pytest's status; "no tests collected" (5) counts as a failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/setup.sh
source scripts/setup.sh
# the web view's e2e test; TLS client certificates; the RabbitMQ tests (rabbitmq_stomp is in it);
# Java 17 for PySpark 4.0's local-mode tests (activemq pulls a JRE too: named so the need is explicit)
install_system_packages chromium openssl rabbitmq-server haproxy openjdk-17-jre-headless
# training: Keras parity and pipeline tests; spark: Spark job; ns3: simulator family C's physics;
# rucio: rucio-sync's client library
install_venv ".[test,training,spark,ns3,rucio]"
install_promtool
# the Rucio server of the rucio-sync tests, in a venv of its own (its pins clash with nettel's)
.venv/bin/python -m devtools.rucio_server install >/dev/null

# ---- test ----------------------------------------------------------------------------------
# Bytecode caches on, even where the machine turns them off: the suite starts hundreds of Python
# processes (workers, `nettel serve`, benchmarks), and without caches each compiles the modules it
# imports again (a fresh clone: pytest 8:06 and 927 CPU-s without, 7:25 and 841 with)
unset PYTHONDONTWRITEBYTECODE
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy service  # settings: pyproject.toml [tool.mypy]
set +e
# Four workers (NETTEL_TEST_WORKERS), handed tests as they free up (worksteal): tests wait on
# brokers and service processes, so a 2-core machine keeps both cores ~90 % busy with four
# (~80 % with three; README, Development); every broker, service and port a test uses is its own
# (free ports, per-process node names).
.venv/bin/python -m pytest -n "${NETTEL_TEST_WORKERS:-4}" --dist worksteal "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "test: pytest collected no tests; failing" >&2
fi
exit "$status"
