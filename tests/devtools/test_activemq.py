"""The private broker really speaks STOMP, and persistent messages survive a crash."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import stomp

from devtools.activemq import ActiveMQProcess, BrokerStartError, start_activemq

pytestmark = pytest.mark.broker

WAIT = 10.0


class Inbox(stomp.ConnectionListener):
    """Collects messages and receipts so tests can wait for them with a timeout."""

    def __init__(self) -> None:
        self.messages: queue.Queue[stomp.utils.Frame] = queue.Queue()
        self.receipts: queue.Queue[str] = queue.Queue()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.messages.put(frame)

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        self.receipts.put(frame.headers["receipt-id"])

    def next_body(self) -> str:
        return str(self.messages.get(timeout=WAIT).body)

    def wait_receipt(self, receipt: str) -> None:
        assert self.receipts.get(timeout=WAIT) == receipt


@contextmanager
def connected(broker: ActiveMQProcess) -> Iterator[tuple[stomp.Connection, Inbox]]:
    conn = stomp.Connection([("127.0.0.1", broker.stomp_port)], timeout=WAIT)
    inbox = Inbox()
    conn.set_listener("inbox", inbox)
    conn.connect(wait=True)
    try:
        yield conn, inbox
    finally:
        conn.disconnect()


def test_topic_message_reaches_subscriber(activemq: ActiveMQProcess) -> None:
    topic = "/topic/nettel.devtools.selftest"
    with connected(activemq) as (subscriber, inbox), connected(activemq) as (publisher, _):
        subscriber.subscribe(topic, id="1", ack="auto", receipt="subscribed")
        inbox.wait_receipt("subscribed")
        publisher.send(topic, body="hello broker")
        assert inbox.next_body() == "hello broker"


def test_persistent_queue_message_survives_kill_and_restart(activemq_factory) -> None:
    broker = activemq_factory()
    destination = "/queue/nettel.devtools.persist"
    with connected(broker) as (producer, inbox):
        producer.send(destination, body="kept", persistent="true", receipt="stored")
        inbox.wait_receipt("stored")
    old_pid = broker.pid
    broker.kill()
    assert not broker.is_running()
    broker.restart()
    assert broker.pid != old_pid
    with connected(broker) as (consumer, inbox):
        consumer.subscribe(destination, id="1", ack="auto")
        assert inbox.next_body() == "kept"


def test_start_refuses_a_port_in_use(activemq: ActiveMQProcess, tmp_path: Path) -> None:
    with pytest.raises(BrokerStartError, match="already in use"):
        start_activemq(tmp_path / "second", stomp_port=activemq.stomp_port)
