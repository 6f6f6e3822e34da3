"""What the in-memory broker adds for tests, beyond the contract it shares with the real brokers
(tests/broker/test_connection_contract.py): the faults a test injects, and the one seam.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from devtools.stomp_client import BrokerClient
from service.broker.connection import BrokerError
from service.broker.memory_broker import MemoryBroker

ROOT = Path(__file__).resolve().parents[2]
#: The modules that may use stomp.py: the STOMP implementation of the seam and its wire.
STOMP_MODULES = {"stomp_connection.py", "stomp_transport.py", "stomp_frames.py"}


def test_only_the_stomp_implementation_and_its_wire_import_stomp() -> None:
    importers = set()
    for path in (ROOT / "service").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            if any(name == "stomp" or name.startswith("stomp.") for name in names):
                importers.add(path.relative_to(ROOT).as_posix())
    assert importers == {f"service/broker/{name}" for name in STOMP_MODULES}


@pytest.mark.parametrize("flavour", ["activemq", "rabbitmq"])
def test_a_refused_connect_says_why_and_the_next_one_is_taken(flavour) -> None:
    broker = MemoryBroker(flavour)
    broker.refuse_next("CONNECT", "maintenance: come back later")
    with pytest.raises(BrokerError, match="maintenance: come back later"):
        BrokerClient(broker.access())
    with BrokerClient(broker.access()) as client:
        assert client.connection.is_connected()
    assert broker.connections == 0


def test_a_refused_frame_is_an_error_frame_naming_its_receipt_and_the_next_is_taken() -> None:
    broker = MemoryBroker("activemq")
    client = BrokerClient(broker.access())
    broker.refuse_next("SEND", "queue full")
    client.send("/queue/q", b"one", {"receipt": "first"})
    error = client.wait_for_error()
    assert (error.headers["message"], error.headers["receipt-id"]) == ("queue full", "first")
    client.send_confirmed("/queue/q", b"two", "second")  # ActiveMQ keeps the connection
    client.subscribe("/queue/q", receipt="reading")
    assert [m.body for m in client.wait_for_messages(1)] == [b"two"]
    client.close()


def test_dropped_connections_end_and_the_broker_takes_new_ones() -> None:
    broker = MemoryBroker("rabbitmq")
    clients = [BrokerClient(broker.access()) for _ in range(3)]
    broker.drop_connections()
    assert all(client.ended.wait(5) for client in clients)
    assert broker.connections == 0
    with BrokerClient(broker.access()) as again:
        again.send_confirmed("/queue/q", b"x", "taken")


def test_a_frozen_broker_takes_frames_only_once_thawed_and_without_heartbeats_nobody_notices() -> (
    None
):
    broker = MemoryBroker("activemq")
    consumer, producer = BrokerClient(broker.access()), BrokerClient(broker.access())
    consumer.subscribe("/queue/q", receipt="reading")
    broker.freeze()
    producer.send("/queue/q", b"held", {"receipt": "held"})
    with pytest.raises(TimeoutError):  # proves that a frozen broker answers nothing
        producer.wait_for_receipt("held", timeout=0.3)
    assert consumer.messages == [] and not consumer.ended.is_set()
    broker.thaw()
    producer.wait_for_receipt("held")
    assert [m.body for m in consumer.wait_for_messages(1)] == [b"held"]
    assert consumer.connection.is_connected() and not consumer.heartbeat_timeout.is_set()
    consumer.close()
    producer.close()


def test_a_stopped_broker_keeps_durable_queues_with_their_persistent_messages_only() -> None:
    broker = MemoryBroker("activemq")
    with BrokerClient(broker.access()) as producer:
        producer.send_confirmed("/queue/kept", b"persistent", "p", {"persistent": "true"})
        producer.send_confirmed("/queue/kept", b"transient", "t")
    broker.stop()
    assert broker.consumers("kept") == 0
    with pytest.raises(ConnectionRefusedError):
        BrokerClient(broker.access())
    broker.start()
    with BrokerClient(broker.access()) as consumer:
        consumer.subscribe("/queue/kept", receipt="reading")
        consumer.send_confirmed("/queue/kept", b"after", "after")
        assert [m.body for m in consumer.wait_for_body(b"after")] == [b"persistent", b"after"]
