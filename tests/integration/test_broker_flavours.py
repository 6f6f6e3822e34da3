"""What one broker flavour has of its own, on the real broker (the in-memory one models neither):

- RabbitMQ as OSG runs it: STOMP over TLS into a vhost, and nettel's named durable queue
  (`<client-id>.<topic>`) keeping what is published while the service is away;
- ActiveMQ's virtual topics: nettel consumes its own queue (`Consumer.<client-id>.<topic>`),
  which keeps data while it is away.

(That `auto` refuses virtual topics on RabbitMQ, and the durable subscriptions of both flavours,
run over the in-memory broker; the frames nettel sends for them are the connection contract's.)
"""

from __future__ import annotations

import json

import httpx
import pytest

from devtools.activemq import generate_test_pki
from devtools.stomp_client import StompClient
from devtools.waiting import wait_for
from service.config import LOSS_TOPIC
from tests.integration.wire import current_minute_ts, links_to, sample_body

pytestmark = [pytest.mark.broker, pytest.mark.slow]
VHOST = "perfsonar"
VIRTUAL_LOSS = "/topic/VirtualTopic.perfsonar.raw.packet-loss-rate"
VIRTUAL_DELAY = "/topic/VirtualTopic.perfsonar.raw.histogram-owdelay"


@pytest.mark.rabbitmq
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


def test_virtual_topic_queue_keeps_messages_published_while_the_service_is_down(
    activemq, nettel_service
):
    args = (
        *("--interval", "1", "--subscription", "virtual", "--client-id", "vt-test"),
        *("--loss-topic", VIRTUAL_LOSS, "--delay-topic", VIRTUAL_DELAY),
    )
    first = nettel_service(activemq.brokers, *args)
    wait_for(lambda: httpx.get(f"{first.url}/readyz").status_code == 200, what="ready")
    publisher = StompClient(activemq.brokers)
    minute = current_minute_ts(1)
    publisher.send(VIRTUAL_LOSS, sample_body("packet-loss-rate.json", [minute], source="10.77.0.1"))
    wait_for(lambda: "10.77.0.1" in (links_to(first.url, "198.51.100.20") or {}), what="link 1")
    assert first.stop() == 0
    body = json.dumps(sample_body("packet-loss-rate.json", [minute], source="10.77.0.2"))
    publisher.send(VIRTUAL_LOSS, body, headers={"persistent": "true"})
    publisher.close()
    second = nettel_service(activemq.brokers, *args)
    wait_for(
        lambda: "10.77.0.2" in (links_to(second.url, "198.51.100.20") or {}),
        what="the datapoint published while the service was down",
    )
