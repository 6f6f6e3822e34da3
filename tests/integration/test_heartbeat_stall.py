"""A `nettel serve` process starved for a few seconds (SIGSTOP, then SIGCONT) keeps its broker
connection: the heart-beat tolerance covers the stall on both sides (what nettel waits for
from the broker, and what the CONNECT frame promises the broker). With the stomp.py defaults
(1.5 periods, the period promised as is) the same stall costs a reconnect, and the broker
redelivers everything unacknowledged."""

from __future__ import annotations

import os
import signal
import time

import pytest

from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from tests.integration.wire import get_json

pytestmark = [pytest.mark.broker, pytest.mark.slow]
HEARTBEAT_MS = 1000
STALL_SECONDS = 4.0


def stall(pid: int, seconds: float) -> None:
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.parametrize(
    ("tolerance", "reconnects"),
    [("6", False), ("1.5", True)],
    ids=["tolerance-covers-the-stall", "stomp.py-default-grace"],
)
def test_a_starved_process_keeps_its_broker_connection(
    activemq, nettel_service, tolerance: str, reconnects: bool
):
    service = nettel_service(
        activemq.brokers,
        *("--heartbeat-ms", str(HEARTBEAT_MS), "--heartbeat-tolerance", tolerance),
        *("--subscription", "plain", "--client-id", f"nettel-stall-{tolerance}"),
    )
    wait_for(lambda: get_json(f"{service.url}/readyz"), what="connected and a matrix")
    assert metric_value(service.url, "nettel_broker_connections_total") == 1.0

    stall(service.pid, STALL_SECONDS)
    time.sleep(3 * HEARTBEAT_MS / 1000)  # the heart-beat checks run again after the stall
    wait_for(lambda: get_json(f"{service.url}/readyz"), what="ready after the stall")

    connections = metric_value(service.url, "nettel_broker_connections_total")
    lost = service.log_text().count("broker connection lost")
    if reconnects:
        assert connections >= 2 and lost >= 1, service.log_tail()
    else:
        assert (connections, lost) == (1.0, 0), service.log_tail()
