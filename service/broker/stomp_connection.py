"""`BrokerConnection` over the network: STOMP 1.2 with stomp.py and nettel's receive path.

One `StompConnection` is one stomp.py connection (`stomp_transport.BufferedConnection12`: the
bounded, linear frame reader) to the first reachable broker of the access's list (one attempt
per broker: reconnecting is `link.BrokerLink`'s), with its heart-beats (`heartbeat_header`),
vhost (the CONNECT frame's `host`), credentials and TLS. stomp.py's exceptions come out as
`BrokerError` (their class name as `kind`), so no user of a connection needs stomp.py; a refused
CONNECT says why with the broker's ERROR message when the exception has none. Listeners are
stomp.py's own: MESSAGE frames reach their `on_message` straight from the receive loop.

With TLS every broker is reached over TLS (ActiveMQ's ``stomp+ssl`` connector, RabbitMQ's
``stomp.listeners.ssl``): the broker's certificate must chain to the given CA file (or to the
system's CAs) and name the host as it is written in the broker list; a client certificate is
presented when one is given. The passcode is only ever sent in the CONNECT frame and never
logged.
"""

from __future__ import annotations

import fcntl
import sys
import termios
from collections.abc import Iterable, Mapping

from stomp.exception import StompException

from service.broker.connection import (
    AckMode,
    BrokerAccess,
    BrokerError,
    ConnectionListener,
    Frame,
)
from service.broker.stomp_transport import BufferedConnection12, BufferedTransport

#: The listener name of the connection's own ERROR watch (sorted before users' names).
_REFUSAL_WATCH = " refusal"


def heartbeat_header(heartbeat_ms: int, tolerance: float) -> tuple[int, int]:
    """The CONNECT frame's `heart-beat` (cx, cy): a beat is sent every `heartbeat_ms` but only
    one every `tolerance` periods is promised, so the broker, which closes a connection silent
    for about cx, waits out a stall of this process; cy asks the broker for one every period,
    and the connection counts as lost after `tolerance` of those without a byte.

    >>> heartbeat_header(10_000, 3.0), heartbeat_header(0, 3.0)
    ((30000, 10000), (0, 0))
    """
    return round(heartbeat_ms * tolerance), heartbeat_ms


class _RefusalWatch(ConnectionListener):
    """Keeps the message of the broker's last ERROR frame, the reason of a refused CONNECT."""

    def __init__(self) -> None:
        self.message: str | None = None

    def on_error(self, frame: Frame) -> None:
        self.message = frame.headers.get("message") or None


def _error(error: StompException, reason: str | None = None) -> BrokerError:
    return BrokerError(str(error) or reason or "", kind=type(error).__name__)


class StompConnection:
    """A `BrokerConnection` to the brokers of `access`, over TCP or TLS (see the module)."""

    def __init__(self, access: BrokerAccess) -> None:
        self._access = access
        brokers = list(access.brokers)
        self._stomp = BufferedConnection12(
            brokers,
            heartbeats=heartbeat_header(access.heartbeat_ms, access.heartbeat_tolerance),
            heart_beat_receive_scale=access.heartbeat_tolerance,
            send_every_ms=access.heartbeat_ms,
            reconnect_attempts_max=1,
            vhost=access.vhost,
        )
        self._refusal = _RefusalWatch()
        self._stomp.set_listener(_REFUSAL_WATCH, self._refusal)
        if access.tls is not None:
            self._stomp.set_ssl(
                for_hosts=brokers,
                key_file=access.tls.key_file,
                cert_file=access.tls.cert_file,
                ca_certs=access.tls.ca_file,
            )

    @property
    def server(self) -> str | None:
        return self._stomp.server

    @property
    def frames_cut(self) -> int:
        cut: int = self._stomp.transport.frames.frames_cut
        return cut

    @property
    def transport(self) -> BufferedTransport:
        """The wire under the connection (its frame reader, socket), for wire-level checks."""
        transport: BufferedTransport = self._stomp.transport
        return transport

    def add_listener(self, name: str, listener: ConnectionListener) -> None:
        self._stomp.set_listener(name, listener)

    def connect(self, headers: Mapping[str, str] | None = None) -> None:
        access = self._access
        try:
            self._stomp.connect(
                access.user, access.passcode, wait=True, headers=dict(headers or {})
            )
        except StompException as error:  # e.g. ActiveMQ: client id already connected
            raise _error(error, self._refusal.message) from error

    def is_connected(self) -> bool:
        connected: bool = self._stomp.is_connected()
        return connected

    def subscribe(
        self,
        destination: str,
        id: str,
        ack: AckMode = "auto",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        try:
            self._stomp.subscribe(destination, id=id, ack=ack, headers=dict(headers or {}))
        except StompException as error:
            raise _error(error) from error

    def unsubscribe(self, id: str) -> None:
        try:
            self._stomp.unsubscribe(id=id)
        except StompException as error:
            raise _error(error) from error

    def send(
        self,
        destination: str,
        body: bytes | str,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        try:
            self._stomp.send(destination, body, content_type, dict(headers or {}))
        except StompException as error:
            raise _error(error) from error

    def ack_all(self, ack_ids: Iterable[str]) -> None:
        try:
            self._stomp.ack_all(ack_ids)
        except StompException as error:
            raise _error(error) from error

    def nack(self, ack_id: str) -> None:
        try:
            self._stomp.nack(ack_id)
        except StompException as error:
            raise _error(error) from error

    def disconnect(self) -> None:
        try:
            self._stomp.disconnect()
        except (StompException, OSError):
            pass

    def frame_seconds(self) -> float:
        seconds: float = self._stomp.transport.frame_seconds()
        return seconds

    def drop(self, reason: str) -> None:
        self._stomp.transport.drop(reason)

    def unread_bytes(self) -> int:
        """Bytes waiting in the socket's receive buffer (FIONREAD); many mean the receiver is
        behind a backlog the broker is handing out."""
        socket = self._stomp.transport.socket
        if socket is None:
            return 0
        try:
            waiting = fcntl.ioctl(socket.fileno(), termios.FIONREAD, bytes(4))
        except (OSError, ValueError):  # closed meanwhile
            return 0
        return int.from_bytes(waiting, sys.byteorder, signed=True)
