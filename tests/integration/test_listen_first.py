"""A second `nettel serve` on an HTTP port in use stops at once, before it connects to the
broker: the running one keeps its connection (same client-id: the broker would have refused or
dropped one of them, "client already connected")."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from devtools.metrics_reader import metric_value
from devtools.service_process import REPO_ROOT
from devtools.waiting import wait_for
from tests.integration.wire import get_json

pytestmark = [pytest.mark.broker, pytest.mark.slow]
CLIENT_ID = "nettel-listen-first"


def test_a_port_in_use_stops_the_second_service_before_the_broker(activemq, nettel_service):
    first = nettel_service(activemq.brokers, "--client-id", CLIENT_ID, "--subscription", "plain")
    wait_for(lambda: get_json(f"{first.url}/readyz"), what="the first service ready")
    listen = first.url.removeprefix("http://")
    started = time.monotonic()
    second = subprocess.run(
        [sys.executable, "-m", "service", "serve", "--brokers", activemq.brokers],
        env={"NETTEL_LISTEN": listen, "NETTEL_CLIENT_ID": CLIENT_ID, "PATH": "/usr/bin:/bin"},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 2, second.stderr
    assert time.monotonic() - started < 20
    assert f"--listen / NETTEL_LISTEN: cannot listen on {listen}" in second.stderr
    assert "Address already in use" in second.stderr
    assert "broker connected" not in second.stdout + second.stderr
    time.sleep(1)
    assert metric_value(first.url, "nettel_broker_connections_total") == 1.0
    assert "connection lost" not in first.log_text()
