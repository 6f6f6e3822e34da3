"""The STOMP client of tests: publish, subscribe, collect what arrives and wait for it.

One stomp.py 1.2 connection; every message of every subscription is kept (headers, body) until
taken, and every RECEIPT is recorded, so a test waits on a condition instead of sleeping::

    client = StompClient(broker.brokers)
    client.subscribe("/topic/telemetry")
    client.send("/topic/perfsonar.raw.packet-loss-rate", body)    # a dict is sent as JSON
    (message,) = client.wait_for_messages(1, what="the telemetry message")
    message.json()["meta"]
    client.close()
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

import stomp
import stomp.utils

#: RabbitMQ's default vhost as the `host` header (stomp.py would send the broker's host name,
#: which RabbitMQ takes for a vhost); ActiveMQ ignores it.
DEFAULT_VHOST = "/"


class Message(NamedTuple):
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class StompClient(stomp.ConnectionListener):
    """A connected STOMP client (`brokers`: "host:port") that keeps what it receives."""

    def __init__(
        self,
        brokers: str,
        vhost: str = DEFAULT_VHOST,
        *,
        reconnect_attempts_max: int = 3,
    ) -> None:
        host, port = brokers.rsplit(":", 1)
        self._changed = threading.Condition()
        self._messages: list[Message] = []
        self._receipts: set[str] = set()
        self.connection = stomp.Connection12(
            [(host, int(port))],
            vhost=vhost,
            reconnect_attempts_max=reconnect_attempts_max,
            auto_decode=False,
        )
        self.connection.set_listener("stomp-client", self)
        self.connection.connect(wait=True)

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
        self._await_receipt(receipt, timeout)

    def subscribe(
        self,
        destination: str,
        ack: str = "auto",
        headers: Mapping[str, str] | None = None,
        receipt: str | None = None,
    ) -> None:
        """Subscribe (id: the destination); with `receipt`, return once the broker has it."""
        extra = dict(headers or {}) | ({"receipt": receipt} if receipt else {})
        self.connection.subscribe(destination, id=destination, ack=ack, headers=extra)
        if receipt:
            self._await_receipt(receipt, 10.0)

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

    def arrivals_within(self, seconds: float) -> list[Message]:
        """What arrives in the next `seconds` (back at the first arrival): for checking that
        nothing does, the one wait whose length is what the test asserts."""
        with self._changed:
            count = len(self._messages)
            self._changed.wait_for(lambda: len(self._messages) > count, seconds)
            return self._messages[count:]

    def close(self) -> None:
        if self.connection.is_connected():
            self.connection.disconnect()

    def __enter__(self) -> StompClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _await_receipt(self, receipt: str, timeout: float) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: receipt in self._receipts, timeout):
                raise TimeoutError(f"no RECEIPT {receipt} within {timeout} s")
            self._receipts.discard(receipt)

    def on_message(self, frame: stomp.utils.Frame) -> None:
        with self._changed:
            self._messages.append(Message(dict(frame.headers), frame.body))
            self._changed.notify_all()

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        with self._changed:
            self._receipts.add(frame.headers.get("receipt-id", ""))
            self._changed.notify_all()
