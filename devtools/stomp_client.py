"""The broker client of tests: publish, subscribe, collect what arrives and wait for it.

`BrokerClient(access)` works over any `BrokerConnection` (the access's connector: STOMP over the
network by default, or an in-memory broker's); `StompClient(brokers)` is one over STOMP to
"host:port". Every message of every subscription is kept (headers, body) until taken, and every
RECEIPT, ERROR frame and the connection's end are recorded, so a test waits on a condition
instead of sleeping::

    client = StompClient(broker.brokers)           # or BrokerClient(memory_broker.access())
    client.subscribe("/topic/telemetry")
    client.send("/topic/perfsonar.raw.packet-loss-rate", body)    # a dict is sent as JSON
    (message,) = client.wait_for_messages(1, what="the telemetry message")
    message.json()["meta"]
    client.close()
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from service.broker.connection import (
    AckMode,
    BrokerAccess,
    BrokerError,
    ConnectionListener,
    Frame,
)
from service.broker.stomp_connection import StompConnection
from service.config import parse_address

#: RabbitMQ's default vhost as the `host` header (stomp.py would send the broker's host name,
#: which RabbitMQ takes for a vhost); ActiveMQ ignores it.
DEFAULT_VHOST = "/"


class Message(NamedTuple):
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class BrokerClient(ConnectionListener):
    """A connected client (CONNECT `headers`, e.g. a `client-id`) that keeps what it receives."""

    def __init__(self, access: BrokerAccess, headers: Mapping[str, str] | None = None) -> None:
        self._changed = threading.Condition()
        self._messages: list[Message] = []
        self._receipts: set[str] = set()
        #: The ERROR frames received (headers, body), oldest first.
        self.errors: list[Message] = []
        #: Set once the connection has ended (either side); `heartbeat_timeout` once the broker
        #: went silent for longer than the heart-beat grace.
        self.ended = threading.Event()
        self.heartbeat_timeout = threading.Event()
        self.connection = (access.connector or StompConnection)(access)
        self.connection.add_listener("client", self)
        self.connection.connect(headers)

    def send(
        self,
        destination: str,
        body: Mapping[str, Any] | str | bytes,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Send `body` (a mapping as JSON) to `destination`."""
        payload = body if isinstance(body, str | bytes) else json.dumps(body)
        self.connection.send(destination, payload, headers=dict(headers or {}))

    def send_confirmed(
        self,
        destination: str,
        body: Mapping[str, Any] | str | bytes,
        receipt: str,
        headers: Mapping[str, str] | None = None,
        timeout: float = 5.0,
    ) -> None:
        """Send with a `receipt` header and wait for the broker's RECEIPT (TimeoutError)."""
        self.send(destination, body, {**(headers or {}), "receipt": receipt})
        self.wait_for_receipt(receipt, timeout)

    def subscribe(
        self,
        destination: str,
        ack: AckMode = "auto",
        headers: Mapping[str, str] | None = None,
        receipt: str | None = None,
        id: str | None = None,
    ) -> None:
        """Subscribe (id: the destination unless given); with `receipt`, return once the broker
        has it."""
        extra = dict(headers or {}) | ({"receipt": receipt} if receipt else {})
        self.connection.subscribe(destination, id=id or destination, ack=ack, headers=extra)
        if receipt:
            self.wait_for_receipt(receipt, 10.0)

    def ack(self, messages: Iterable[Message]) -> None:
        """ACK `messages` (by their `ack` headers)."""
        self.connection.ack_all(message.headers["ack"] for message in messages)

    def nack(self, message: Message) -> None:
        self.connection.nack(message.headers["ack"])

    @property
    def messages(self) -> list[Message]:
        """What arrived and is not taken yet (a copy)."""
        with self._changed:
            return list(self._messages)

    def take(self) -> list[Message]:
        """What arrived since the last take."""
        with self._changed:
            taken, self._messages = self._messages, []
        return taken

    def wait_for_messages(
        self, count: int = 1, timeout: float = 30.0, what: str = "messages"
    ) -> list[Message]:
        """The messages not taken once there are at least `count` (AssertionError naming
        `what` after `timeout` s); they stay until taken."""
        with self._changed:
            if self._changed.wait_for(lambda: len(self._messages) >= count, timeout):
                return list(self._messages)
            held = len(self._messages)
        raise AssertionError(
            f"timed out after {timeout} s waiting for {what}: {held} of {count} messages"
        )

    def wait_for_body(self, body: bytes, timeout: float = 30.0) -> list[Message]:
        """The messages not taken once one with `body` is among them."""
        with self._changed:
            if self._changed.wait_for(lambda: any(m.body == body for m in self._messages), timeout):
                return list(self._messages)
        raise AssertionError(f"timed out after {timeout} s waiting for a message {body!r}")

    def wait_for_error(self, timeout: float = 10.0) -> Message:
        """The first ERROR frame, once one came."""
        with self._changed:
            if self._changed.wait_for(lambda: self.errors, timeout):
                return self.errors[0]
        raise AssertionError(f"timed out after {timeout} s waiting for an ERROR frame")

    def wait_for_receipt(self, receipt: str, timeout: float = 10.0) -> None:
        """Return once the RECEIPT for `receipt` came (TimeoutError otherwise)."""
        with self._changed:
            if not self._changed.wait_for(lambda: receipt in self._receipts, timeout):
                raise TimeoutError(f"no RECEIPT {receipt} within {timeout} s")
            self._receipts.discard(receipt)

    def arrivals_within(self, seconds: float) -> list[Message]:
        """What arrives in the next `seconds` (back at the first arrival): for checking that
        nothing does, the one wait whose length is what the test asserts."""
        with self._changed:
            count = len(self._messages)
            self._changed.wait_for(lambda: len(self._messages) > count, seconds)
            return self._messages[count:]

    def close(self) -> None:
        self.connection.disconnect()

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def on_message(self, frame: Frame) -> None:
        with self._changed:
            self._messages.append(Message(dict(frame.headers), bytes(frame.body)))
            self._changed.notify_all()

    def on_receipt(self, frame: Frame) -> None:
        with self._changed:
            self._receipts.add(frame.headers.get("receipt-id", ""))
            self._changed.notify_all()

    def on_error(self, frame: Frame) -> None:
        with self._changed:
            self.errors.append(Message(dict(frame.headers), bytes(frame.body or b"")))
            self._changed.notify_all()

    def on_disconnected(self) -> None:
        self.ended.set()

    def on_heartbeat_timeout(self) -> None:
        self.heartbeat_timeout.set()


class StompClient(BrokerClient):
    """A client over STOMP to `brokers` ("host:port"), connecting up to `attempts` times."""

    def __init__(
        self,
        brokers: str,
        vhost: str = DEFAULT_VHOST,
        *,
        headers: Mapping[str, str] | None = None,
        attempts: int = 3,
        heartbeat_ms: int = 0,
    ) -> None:
        access = BrokerAccess([parse_address(brokers)], heartbeat_ms=heartbeat_ms, vhost=vhost)
        for attempt in range(1, attempts + 1):
            try:
                super().__init__(access, headers)
                return
            except (BrokerError, OSError):
                if attempt == attempts:
                    raise
                time.sleep(0.1 * attempt)
