"""What only RabbitMQ has: OSG's shape of the feed (STOMP over TLS into a vhost), nettel's named
durable queues, and `auto` refusing ActiveMQ's virtual topics there."""

from __future__ import annotations

import json
import queue

import httpx
import pytest
import stomp

from devtools.activemq import generate_test_pki
from service.config import LOSS_TOPIC
from tests.integration.wire import (
    Publisher,
    current_minute_ts,
    links_to,
    sample_body,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.rabbitmq]
VHOST = "perfsonar"


class Inbox(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.bodies: queue.Queue[bytes] = queue.Queue()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.bodies.put(frame.body)


@pytest.mark.slow
def test_tls_into_a_vhost_with_a_durable_queue_named_after_the_client(
    rabbitmq_factory, nettel_service, tmp_path
):
    tls = generate_test_pki(tmp_path / "tls")
    broker = rabbitmq_factory(vhost=VHOST, tls=tls)
    args = ("--interval", "1", "--client-id", "osg-like", "--broker-vhost", VHOST)
    tls_args = ("--broker-tls", "true", "--broker-ca-file", str(tls.ca_file))
    service = nettel_service(broker.ssl_brokers, *args, *tls_args)
    wait_for(lambda: httpx.get(f"{service.url}/readyz").status_code == 200, what="ready")
    assert "RabbitMQ/3." in service.log_text()  # the CONNECTED frame's server, logged

    publisher = Publisher(broker.brokers, vhost=VHOST)
    minute = current_minute_ts(1)
    body = sample_body("packet-loss-rate.json", [minute], source="10.88.0.1")
    publisher.send(LOSS_TOPIC, body)
    wait_for(lambda: "10.88.0.1" in (links_to(service.url, "198.51.100.20") or {}), what="link")
    assert service.stop() == 0

    away = sample_body("packet-loss-rate.json", [minute], source="10.88.0.2")
    publisher.send(LOSS_TOPIC, json.dumps(away))  # kept in nettel's queue while it is away
    publisher.close()
    host, port = broker.brokers.rsplit(":", 1)
    reader, inbox = stomp.Connection12([(host, int(port))], vhost=VHOST), Inbox()
    reader.set_listener("inbox", inbox)
    reader.connect(wait=True)
    queue_name = "osg-like.perfsonar.raw.packet-loss-rate"  # consumed as it stands, not declared
    reader.subscribe(f"/amq/queue/{queue_name}", id="peek", ack="client-individual")
    try:
        assert json.loads(inbox.bodies.get(timeout=10))["meta"]["source"] == "10.88.0.2"
    finally:
        reader.disconnect()  # unacknowledged: back in the queue for nettel
    again = nettel_service(broker.ssl_brokers, *args, *tls_args)
    wait_for(
        lambda: "10.88.0.2" in (links_to(again.url, "198.51.100.20") or {}),
        what="the datapoint published while the service was away",
    )


def test_auto_refuses_virtual_topics_on_rabbitmq_and_says_why(rabbitmq, nettel_service):
    service = nettel_service(rabbitmq.brokers, "--subscription", "virtual", "--client-id", "vt")
    reason = "subscription virtual needs ActiveMQ's virtual topics; the broker is rabbitmq"
    wait_for(lambda: reason in service.log_text(), timeout=15, what="the refusal logged")
    response = httpx.get(f"{service.url}/readyz")
    assert response.status_code == 503
    assert "not connected to a broker" in response.json()["problems"]
    assert service.process.poll() is None
