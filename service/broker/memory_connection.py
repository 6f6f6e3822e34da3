"""One connection to a `memory_broker.MemoryBroker`: the `BrokerConnection` of the in-memory broker.

Frames from the broker (MESSAGE, RECEIPT, ERROR) and the connection's end go through an inbox to
a thread of the connection's own, which calls the listeners in order, as stomp.py's receiver
thread does: a listener may block (wait for a RECEIPT, hold back a backlog) without holding up
the broker or the sender. `unread_bytes` counts the bodies waiting in the inbox, the analogue of
a socket's unread bytes. Nothing is ever read from a wire, so no frame is cut or stuck.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from service.broker.connection import AckMode, BrokerAccess, BrokerError, ConnectionListener

_log = logging.getLogger("nettel.broker.memory")

Event = Literal["message", "receipt", "error", "heartbeat_timeout", "disconnected"]


@dataclass(slots=True)
class MemoryFrame:
    """A frame the in-memory broker sends (the `connection.Frame` shape)."""

    cmd: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class BrokerSide(Protocol):
    """What a connection asks of its broker (`memory_broker.MemoryBroker`), frame by frame."""

    def open(self, connection: MemoryConnection, headers: dict[str, str]) -> str | None: ...

    def close(self, connection: MemoryConnection) -> None: ...

    def subscribe(
        self,
        connection: MemoryConnection,
        destination: str,
        id: str,
        ack: AckMode,
        headers: dict[str, str],
    ) -> None: ...

    def unsubscribe(self, connection: MemoryConnection, id: str) -> None: ...

    def send(
        self, connection: MemoryConnection, destination: str, body: bytes, headers: dict[str, str]
    ) -> None: ...

    def acknowledge(
        self,
        connection: MemoryConnection,
        ack_id: str,
        headers: dict[str, str],
        negative: bool = False,
    ) -> None: ...


class MemoryConnection:
    """A `BrokerConnection` to `broker`, made by `MemoryBroker.connector(access)`.

    The access's heart-beat grace is how long a frozen broker (`MemoryBroker.freeze`) goes
    unnoticed; credentials, addresses, vhost and TLS have no meaning in memory.
    """

    def __init__(self, broker: BrokerSide, access: BrokerAccess) -> None:
        self._broker = broker
        self.access = access
        self._listeners: dict[str, ConnectionListener] = {}
        self._ordered: tuple[ConnectionListener, ...] = ()
        self._inbox: deque[tuple[Event, MemoryFrame | None]] = deque()
        self._changed = threading.Condition()
        self._unread = 0
        self._connected = False
        self._ended = False  # the end was posted: nothing more goes to the inbox
        #: The CONNECT frame's `client-id` (brokers that know client ids hold one per id).
        self.client_id: str | None = None
        self._server: str | None = None
        #: Why `drop` closed the connection; None when it did not.
        self.dropped_for: str | None = None

    @property
    def server(self) -> str | None:
        return self._server

    @property
    def frames_cut(self) -> int:
        return 0

    def add_listener(self, name: str, listener: ConnectionListener) -> None:
        with self._changed:
            self._listeners[name] = listener
            self._ordered = tuple(self._listeners[key] for key in sorted(self._listeners))

    def connect(self, headers: Mapping[str, str] | None = None) -> None:
        threading.Thread(target=self._deliver, name="memory-broker-receiver", daemon=True).start()
        try:
            self._server = self._broker.open(self, dict(headers or {}))
        except BaseException:
            self.end()
            raise
        self._connected = True

    def is_connected(self) -> bool:
        return self._connected

    def subscribe(
        self,
        destination: str,
        id: str,
        ack: AckMode = "auto",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._broker.subscribe(self._usable(), destination, id, ack, dict(headers or {}))

    def unsubscribe(self, id: str) -> None:
        self._broker.unsubscribe(self._usable(), id)

    def send(
        self,
        destination: str,
        body: bytes | str,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        payload = body.encode() if isinstance(body, str) else bytes(body)
        sent = dict(headers or {})
        if content_type is not None:
            sent["content-type"] = content_type
        self._broker.send(self._usable(), destination, payload, sent)

    def ack_all(self, ack_ids: Iterable[str]) -> None:
        connection = self._usable()
        for ack_id in ack_ids:
            self._broker.acknowledge(connection, ack_id, {})

    def nack(self, ack_id: str) -> None:
        self._broker.acknowledge(self._usable(), ack_id, {}, negative=True)

    def disconnect(self) -> None:
        if self._connected:
            self._connected = False
            self._broker.close(self)
        self.end()

    def frame_seconds(self) -> float:
        return 0.0

    def drop(self, reason: str) -> None:
        self.dropped_for = reason
        self.disconnect()

    def unread_bytes(self) -> int:
        return self._unread

    # What the broker calls (with its lock held: posting never blocks).

    def post(self, event: Event, frame: MemoryFrame | None = None) -> None:
        """Queue `event` for the listeners (the broker's side of the socket)."""
        with self._changed:
            if self._ended:
                return
            self._inbox.append((event, frame))
            if frame is not None and event == "message":
                self._unread += len(frame.body)
            self._changed.notify()

    def lost(self, heartbeat_timeout: bool = False) -> None:
        """The broker or the network ended the connection (after a heart-beat timeout: the
        broker went silent)."""
        self._connected = False
        if heartbeat_timeout:
            self.post("heartbeat_timeout")
        self.end()

    def end(self) -> None:
        """Post the connection's end (once): the receiving thread tells the listeners and ends."""
        with self._changed:
            if self._ended:
                return
            self._inbox.append(("disconnected", None))
            self._ended = True
            self._changed.notify()

    def _usable(self) -> MemoryConnection:
        if not self._connected:
            raise BrokerError("not connected", kind="NotConnectedException")
        return self

    def _deliver(self) -> None:
        """The receiving thread: hand each event to the listeners, in order, until the end."""
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._inbox)
                event, frame = self._inbox.popleft()
                if frame is not None and event == "message":
                    self._unread -= len(frame.body)
                listeners = self._ordered
            for listener in listeners:
                handler = getattr(listener, f"on_{event}", None)
                if handler is None:
                    continue
                try:
                    handler() if frame is None else handler(frame)
                except Exception:  # noqa: BLE001 - as a receiver thread, outlive a listener's bug
                    _log.exception("listener failed", extra={"event": event})
            if event == "disconnected":
                return
