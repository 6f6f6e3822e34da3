"""The private broker really speaks STOMP, and persistent messages survive a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.activemq import ActiveMQProcess, BrokerStartError, start_activemq
from devtools.stomp_client import StompClient

pytestmark = pytest.mark.broker

WAIT = 10.0


def test_topic_message_reaches_subscriber(activemq: ActiveMQProcess) -> None:
    topic = "/topic/nettel.devtools.selftest"
    with StompClient(activemq.brokers) as subscriber, StompClient(activemq.brokers) as publisher:
        subscriber.subscribe(topic, receipt="subscribed")
        publisher.send(topic, "hello broker")
        (message,) = subscriber.wait_for_messages(1, WAIT, "the topic message")
        assert message.body == b"hello broker"


def test_persistent_queue_message_survives_kill_and_restart(activemq_factory) -> None:
    broker = activemq_factory()
    destination = "/queue/nettel.devtools.persist"
    with StompClient(broker.brokers) as producer:
        producer.send_confirmed(destination, "kept", "stored", {"persistent": "true"}, WAIT)
    old_pid = broker.pid
    broker.kill()
    assert not broker.is_running()
    broker.restart()
    assert broker.pid != old_pid
    with StompClient(broker.brokers) as consumer:
        consumer.subscribe(destination)
        (message,) = consumer.wait_for_messages(1, WAIT, "the persistent message")
        assert message.body == b"kept"


def test_start_refuses_a_port_in_use(activemq: ActiveMQProcess, tmp_path: Path) -> None:
    with pytest.raises(BrokerStartError, match="already in use"):
        start_activemq(tmp_path / "second", stomp_port=activemq.stomp_port)
