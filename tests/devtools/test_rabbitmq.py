"""The private RabbitMQ node speaks STOMP on its own ports only, keeps its files under its base
directory, and persistent messages in a durable queue survive a crash."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest
import stomp

from devtools.activemq import BrokerStartError
from devtools.rabbitmq import RabbitMQProcess, start_rabbitmq

pytestmark = [pytest.mark.broker, pytest.mark.rabbitmq]


class Inbox(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.frames: queue.Queue[stomp.utils.Frame] = queue.Queue()
        self.receipts: queue.Queue[str] = queue.Queue()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.frames.put(frame)

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        self.receipts.put(frame.headers["receipt-id"])


def connect(broker: RabbitMQProcess, inbox: Inbox | None = None) -> stomp.Connection12:
    connection = stomp.Connection12([("127.0.0.1", broker.stomp_port)], vhost="/")
    if inbox is not None:
        connection.set_listener("inbox", inbox)
    connection.connect(wait=True)
    return connection


def listening_addresses(port: int) -> set[str]:
    """Local IPv4 addresses with a socket listening on `port` (from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_the_node_listens_on_loopback_only_and_keeps_to_its_folder(
    rabbitmq: RabbitMQProcess,
) -> None:
    for port in (rabbitmq.stomp_port, rabbitmq.amqp_port, rabbitmq.dist_port):
        assert listening_addresses(port) == {"127.0.0.1"}, port
    base = rabbitmq.base_dir
    assert (base / ".erlang.cookie").exists()  # its own cookie, not the system node's
    assert (base / "mnesia").is_dir() and rabbitmq.log_path.parent == base
    inbox = Inbox()
    connection = connect(rabbitmq, inbox)
    try:
        connection.send("/queue/nettel.devtools.selftest", "hello node")
        connection.subscribe("/queue/nettel.devtools.selftest", id="1", ack="auto")
        assert inbox.frames.get(timeout=10).body == "hello node"
    finally:
        connection.disconnect()


@pytest.mark.slow
def test_persistent_message_in_a_durable_queue_survives_kill_and_start(rabbitmq_factory) -> None:
    broker = rabbitmq_factory()
    destination = "/queue/nettel.devtools.persist"
    declaring = connect(broker)
    declaring.subscribe(destination, id="0", ack="auto")  # declares the durable queue
    declaring.disconnect()
    # A node writes a queue's definition to disk in the background: killed moments after the
    # declaration it can come back without the queue (seen under load). A clean restart puts the
    # definition on disk, so what the kill below tests is the message alone.
    broker.restart()
    inbox = Inbox()
    producer = connect(broker, inbox)
    producer.send(destination, "kept", headers={"persistent": "true", "receipt": "stored"})
    assert inbox.receipts.get(timeout=10) == "stored"  # RabbitMQ's confirm: on disk
    producer.disconnect()
    old_pid = broker.pid
    broker.kill()
    assert not broker.is_running()
    broker.start()
    assert broker.pid != old_pid
    inbox = Inbox()
    consumer = connect(broker, inbox)
    try:
        consumer.subscribe(destination, id="1", ack="auto")
        assert inbox.frames.get(timeout=10).body == "kept"
    finally:
        consumer.disconnect()


def test_start_refuses_a_port_in_use(rabbitmq: RabbitMQProcess, tmp_path: Path) -> None:
    with pytest.raises(BrokerStartError, match="already in use"):
        start_rabbitmq(tmp_path / "second", stomp_port=rabbitmq.stomp_port)
