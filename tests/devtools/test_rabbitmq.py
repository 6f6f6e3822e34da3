"""The private RabbitMQ node speaks STOMP on its own ports only, keeps its files under its base
directory, and persistent messages in a durable queue survive a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.activemq import BrokerStartError
from devtools.rabbitmq import RabbitMQProcess, start_rabbitmq
from devtools.stomp_client import StompClient

pytestmark = [pytest.mark.broker, pytest.mark.rabbitmq]


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
    with StompClient(rabbitmq.brokers) as client:
        client.send("/queue/nettel.devtools.selftest", "hello node")
        client.subscribe("/queue/nettel.devtools.selftest")
        (message,) = client.wait_for_messages(1, 10, "the queued message")
        assert message.body == b"hello node"


@pytest.mark.slow
def test_persistent_message_in_a_durable_queue_survives_kill_and_start(rabbitmq_factory) -> None:
    broker = rabbitmq_factory()
    destination = "/queue/nettel.devtools.persist"
    with StompClient(broker.brokers) as declaring:
        declaring.subscribe(destination)  # declares the durable queue
    # A node writes a queue's definition to disk in the background: killed moments after the
    # declaration it can come back without the queue (seen under load). A clean restart puts the
    # definition on disk, so what the kill below tests is the message alone.
    broker.restart()
    with StompClient(broker.brokers) as producer:  # RabbitMQ's receipt is its confirm: on disk
        producer.send_confirmed(destination, "kept", "stored", {"persistent": "true"}, 10)
    old_pid = broker.pid
    broker.kill()
    assert not broker.is_running()
    broker.start()
    assert broker.pid != old_pid
    with StompClient(broker.brokers) as consumer:
        consumer.subscribe(destination)
        (message,) = consumer.wait_for_messages(1, 10, "the persistent message")
        assert message.body == b"kept"


def test_start_refuses_a_port_in_use(rabbitmq: RabbitMQProcess, tmp_path: Path) -> None:
    with pytest.raises(BrokerStartError, match="already in use"):
        start_rabbitmq(tmp_path / "second", stomp_port=rabbitmq.stomp_port)
