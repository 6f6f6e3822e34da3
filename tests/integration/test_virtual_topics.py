"""ActiveMQ virtual topics: nettel consumes its own queue, which keeps data while it is away."""

from __future__ import annotations

import json

import httpx
import pytest

from devtools.stomp_client import StompClient
from devtools.waiting import wait_for
from tests.integration.wire import current_minute_ts, links_to, sample_body

VIRTUAL_LOSS = "/topic/VirtualTopic.perfsonar.raw.packet-loss-rate"
VIRTUAL_DELAY = "/topic/VirtualTopic.perfsonar.raw.histogram-owdelay"
pytestmark = pytest.mark.broker


def test_virtual_topic_queue_keeps_messages_published_while_the_service_is_down(
    activemq, nettel_service
):
    args = (
        "--interval",
        "1",
        "--subscription",
        "virtual",
        "--client-id",
        "vt-test",
        "--loss-topic",
        VIRTUAL_LOSS,
        "--delay-topic",
        VIRTUAL_DELAY,
    )
    first = nettel_service(activemq.brokers, *args)
    wait_for(lambda: httpx.get(f"{first.url}/readyz").status_code == 200, what="ready")
    publisher = StompClient(activemq.brokers)
    minute = current_minute_ts(1)
    publisher.send(VIRTUAL_LOSS, sample_body("packet-loss-rate.json", [minute], source="10.77.0.1"))
    wait_for(lambda: "10.77.0.1" in (links_to(first.url, "198.51.100.20") or {}), what="link 1")
    assert first.stop() == 0
    body = json.dumps(sample_body("packet-loss-rate.json", [minute], source="10.77.0.2"))
    publisher.connection.send(VIRTUAL_LOSS, body, headers={"persistent": "true"})
    publisher.close()
    second = nettel_service(activemq.brokers, *args)
    wait_for(
        lambda: "10.77.0.2" in (links_to(second.url, "198.51.100.20") or {}),
        what="the datapoint published while the service was down",
    )
