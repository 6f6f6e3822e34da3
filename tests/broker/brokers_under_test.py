"""The brokers the connection contract runs on, behind one face: the in-memory broker as ActiveMQ
and as RabbitMQ, and the real ActiveMQ and RabbitMQ (private processes of the test setup).

`access()` gives a `BrokerAccess` to it; `client()` a connected `BrokerClient`; the faults
(`stop`, `start`, `freeze`, `thaw`) are the broker process shut down, started again, stopped
(SIGSTOP) and continued for a real broker, the same calls on the in-memory one. (A broker killed
and what it keeps then is tests/devtools' and test_reliability.py's.)
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable, Mapping
from typing import Literal

from devtools.activemq import ActiveMQProcess
from devtools.rabbitmq import RabbitMQProcess
from devtools.stomp_client import DEFAULT_VHOST, BrokerClient
from service.broker.connection import BrokerAccess
from service.broker.memory_broker import MemoryBroker

Flavour = Literal["activemq", "rabbitmq"]
RealBroker = ActiveMQProcess | RabbitMQProcess


class BrokerUnderTest:
    """One broker the contract runs on (see the module)."""

    flavour: Flavour
    #: The clients `client` made, closed by `close_clients`.
    clients: list[BrokerClient]

    def access(self, **options: object) -> BrokerAccess:
        raise NotImplementedError

    def client(self, headers: Mapping[str, str] | None = None, **options: object) -> BrokerClient:
        """A connected client (heart-beats off unless `heartbeat_ms` is given)."""
        client = BrokerClient(self.access(**({"heartbeat_ms": 0} | options)), headers)
        self.clients.append(client)
        return client

    def close_clients(self) -> None:
        for client in self.clients:
            client.close()

    def declare_queue(self, name: str, arguments: Mapping[str, object]) -> None:
        """Declare a queue as an operator would (RabbitMQ's `/amq/queue/NAME`)."""
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def freeze(self) -> None:
        raise NotImplementedError

    def thaw(self) -> None:
        raise NotImplementedError


class InMemory(BrokerUnderTest):
    def __init__(self, flavour: Flavour) -> None:
        self.flavour = flavour
        self.clients = []
        self.broker = MemoryBroker(flavour)

    def access(self, **options: object) -> BrokerAccess:
        return self.broker.access(**options)

    def declare_queue(self, name: str, arguments: Mapping[str, object]) -> None:
        self.broker.declare_queue(name, arguments)

    def stop(self) -> None:
        self.broker.stop()

    def start(self) -> None:
        self.broker.start()

    def freeze(self) -> None:
        self.broker.freeze()

    def thaw(self) -> None:
        self.broker.thaw()


class Real(BrokerUnderTest):
    def __init__(self, process: RealBroker) -> None:
        self.flavour = "rabbitmq" if isinstance(process, RabbitMQProcess) else "activemq"
        self.clients = []
        self.process = process

    def access(self, **options: object) -> BrokerAccess:
        address = [("127.0.0.1", self.process.stomp_port)]
        return BrokerAccess(address, vhost=DEFAULT_VHOST, **options)  # type: ignore[arg-type]

    def declare_queue(self, name: str, arguments: Mapping[str, object]) -> None:
        assert isinstance(self.process, RabbitMQProcess), "only RabbitMQ declares queues so"
        self.process.declare_queue(name, arguments)

    def stop(self) -> None:
        self.process.stop()

    def start(self) -> None:
        self.process.start()

    def freeze(self) -> None:
        os.killpg(self._pid(), signal.SIGSTOP)  # the TCP connections stay open, silent

    def thaw(self) -> None:
        os.killpg(self._pid(), signal.SIGCONT)

    def _pid(self) -> int:
        pid = self.process.pid
        assert pid is not None
        return pid


def broker_under_test(
    implementation: str, real: Callable[[Flavour], RealBroker]
) -> BrokerUnderTest:
    """The broker of `implementation` ("memory-activemq", "memory-rabbitmq", "activemq" or
    "rabbitmq"); `real(flavour)` gives a real one."""
    if implementation.startswith("memory-"):
        flavour: Flavour = "rabbitmq" if implementation.endswith("rabbitmq") else "activemq"
        return InMemory(flavour)
    return Real(real("rabbitmq" if implementation == "rabbitmq" else "activemq"))


def unique(prefix: str) -> str:
    """A name no other test uses (the real brokers are shared by the session)."""
    return f"{prefix}.{uuid.uuid4().hex[:10]}"
