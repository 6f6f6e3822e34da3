"""The one seam between nettel and a STOMP broker: what a connection does, what it tells its user.

Everything of nettel that talks to a broker (the feed's subscription, the HA election, the
telemetry publisher, all through `link.BrokerLink`) uses a `BrokerConnection` made by the
`Connector` of its `BrokerAccess`. Two implementations keep the same contract (proved by one
suite, tests/broker/test_connection_contract.py, run on both and on the real brokers):

- `stomp_connection.StompConnection`, the default: STOMP 1.2 over TCP or TLS with stomp.py and
  nettel's bounded receive path (`stomp_transport`), failover over the broker list, heart-beats;
- `memory_broker.MemoryBroker.connector`: an in-memory broker (topics, queues, durable
  subscriptions, acknowledgement, redelivery, injectable disconnects and ERROR frames), so a
  whole runtime can be built and tested without a broker process.

The names and frame shape follow STOMP (and stomp.py): a listener's `on_message(frame)` gets a
frame with `cmd`, `headers` and `body` (bytes); receipts are asked for with a `receipt` header
and answered by `on_receipt` with the frame's `receipt-id`; a refusal is an ERROR frame
(`on_error`, its `message` header saying why). A connection calls its listeners on one thread
of its own, in the order the broker sent the frames, listeners in the order of their names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from service.config import Address

#: STOMP's acknowledgement modes: `auto` (acknowledged once sent), `client` (an ACK covers the
#: frames of the subscription before it too), `client-individual` (each frame its own ACK).
AckMode = Literal["auto", "client", "client-individual"]

#: How long a connection waits for the broker's CONNECTED frame.
CONNECT_TIMEOUT_SECONDS = 10.0
#: A frame still arriving after this long (without heart-beats) gets its connection dropped.
FRAME_TIMEOUT_SECONDS = 30.0


class BrokerError(Exception):
    """A broker refused a frame or could not be reached; `kind` names the underlying failure
    (e.g. stomp.py's `ConnectFailedException`) for the log."""

    def __init__(self, message: str = "", kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind or type(self).__name__


class Frame(Protocol):
    """A frame from the broker: MESSAGE, RECEIPT or ERROR."""

    cmd: str
    headers: dict[str, str]
    body: bytes


class ConnectionListener:
    """What a connection tells its user; override what you need (the rest do nothing).

    Runs on the connection's receiving thread: a slow handler holds back the frames after it.
    """

    def on_message(self, frame: Frame) -> None:
        """A MESSAGE of one of the connection's subscriptions (`subscription` header: its id)."""

    def on_receipt(self, frame: Frame) -> None:
        """The broker's RECEIPT for the frame whose `receipt` header was `receipt-id`."""

    def on_error(self, frame: Frame) -> None:
        """The broker's ERROR frame: a frame refused (`message` says why); no RECEIPT follows
        for it."""

    def on_disconnected(self) -> None:
        """The connection is gone (closed by either side, the network, or the broker's loss)."""

    def on_heartbeat_timeout(self) -> None:
        """No byte from the broker within the heart-beat grace: the connection is closed."""


class BrokerConnection(Protocol):
    """One connection to a broker, made (not yet connected) by a `Connector`.

    Sending methods raise `BrokerError` or `OSError` when the connection is unusable.
    """

    @property
    def server(self) -> str | None:
        """The `server` header of the broker's CONNECTED frame; None before it or without one."""
        ...

    @property
    def frames_cut(self) -> int:
        """Frames longer than the receive bound, delivered cut (0 where nothing is cut)."""
        ...

    def add_listener(self, name: str, listener: ConnectionListener) -> None:
        """Tell `listener` about the frames and events from now on (listeners in name order)."""
        ...

    def connect(self, headers: Mapping[str, str] | None = None) -> None:
        """CONNECT (with the access's credentials and `headers`, e.g. `client-id`) and wait for
        CONNECTED; BrokerError (reason: the broker's ERROR message) or OSError when refused."""
        ...

    def is_connected(self) -> bool: ...

    def subscribe(
        self,
        destination: str,
        id: str,
        ack: AckMode = "auto",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """SUBSCRIBE; a `receipt` header asks for a RECEIPT once the broker has it."""
        ...

    def unsubscribe(self, id: str) -> None: ...

    def send(
        self,
        destination: str,
        body: bytes | str,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None: ...

    def ack_all(self, ack_ids: Iterable[str]) -> None:
        """ACK each of `ack_ids` (received frames' `ack` headers), in one write where possible."""
        ...

    def nack(self, ack_id: str) -> None:
        """NACK a received frame: the broker does with it what its flavour does (redelivers it,
        or dead-letters it)."""
        ...

    def disconnect(self) -> None:
        """DISCONNECT and close; unacknowledged frames go back to the broker. Never raises."""
        ...

    def frame_seconds(self) -> float:
        """How long the frame being received has been arriving; 0 between frames."""
        ...

    def drop(self, reason: str) -> None:
        """Close the connection under its user, for `reason` (listeners hear `on_disconnected`)."""
        ...

    def unread_bytes(self) -> int:
        """Bytes the broker has sent that wait unread on this side (0 when unknown)."""
        ...


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for TLS to the brokers; `ca_file=None` trusts the system's CAs."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None


#: Makes a connection (not yet connected) as `access` says; `BrokerAccess.connector`.
Connector = Callable[["BrokerAccess"], BrokerConnection]


@dataclass(frozen=True)
class BrokerAccess:
    """Where and how every connection of nettel reaches the brokers (one place for all users).

    `brokers` is the failover list; `vhost` the CONNECT frame's `host` header (stomp.py's
    default: the broker's host name); `tls` None for plain TCP. Heart-beats go both ways every
    `heartbeat_ms` (0: none); `heartbeat_tolerance` is the grace the STOMP spec asks receivers
    to allow, on both sides. `connector` makes the connections: None for STOMP over the network
    (`stomp_connection.StompConnection`), or e.g. an in-memory broker's.
    """

    brokers: Sequence[Address]
    user: str | None = None
    passcode: str | None = field(default=None, repr=False)
    heartbeat_ms: int = 10_000
    heartbeat_tolerance: float = 3.0
    tls: TlsFiles | None = None
    vhost: str | None = None
    connector: Connector | None = field(default=None, compare=False)

    @property
    def heartbeat_grace_seconds(self) -> float:
        """How long the broker may stay silent before a connection counts as lost (0: never)."""
        return self.heartbeat_ms * self.heartbeat_tolerance / 1000

    @property
    def frame_timeout_seconds(self) -> float:
        """How long one frame may take to arrive before its connection is dropped."""
        return self.heartbeat_grace_seconds or FRAME_TIMEOUT_SECONDS
