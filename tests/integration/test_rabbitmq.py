"""What only RabbitMQ has: OSG's shape of the feed (STOMP over TLS into a vhost), nettel's named
durable queues, and `auto` refusing ActiveMQ's virtual topics there."""

from __future__ import annotations

import json

import httpx
import pytest

from devtools.activemq import generate_test_pki
from devtools.stomp_client import StompClient
from devtools.waiting import wait_for
from service.config import LOSS_TOPIC
from tests.integration.wire import current_minute_ts, links_to, sample_body

pytestmark = [pytest.mark.broker, pytest.mark.rabbitmq]
VHOST = "perfsonar"


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

    publisher = StompClient(broker.brokers, vhost=VHOST)
    minute = current_minute_ts(1)
    body = sample_body("packet-loss-rate.json", [minute], source="10.88.0.1")
    publisher.send(LOSS_TOPIC, body)
    wait_for(lambda: "10.88.0.1" in (links_to(service.url, "198.51.100.20") or {}), what="link")
    assert service.stop() == 0

    away = sample_body("packet-loss-rate.json", [minute], source="10.88.0.2")
    publisher.send(LOSS_TOPIC, json.dumps(away))  # kept in nettel's queue while it is away
    publisher.close()
    queue_name = "osg-like.perfsonar.raw.packet-loss-rate"  # consumed as it stands, not declared
    with StompClient(broker.brokers, vhost=VHOST) as reader:
        reader.subscribe(f"/amq/queue/{queue_name}", ack="client-individual")
        (kept,) = reader.wait_for_messages(1, 10, "the datapoint kept in nettel's queue")
        assert kept.json()["meta"]["source"] == "10.88.0.2"
    # unacknowledged: back in the queue for nettel
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
