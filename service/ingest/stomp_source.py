"""STOMP adapter: keeps a subscription on one of the configured brokers and feeds frames on.

stomp.py does the protocol (STOMP 1.2, heart-beats, failover over the host list on connect;
frames read and parsed by `stomp_transport`'s leaner receive path);
this module adds a supervisor thread that reconnects with capped exponential backoff and jitter
whenever the connection drops, and the subscription modes:

- ``durable`` (default): ActiveMQ durable topic subscriptions (``client-id`` on CONNECT,
  ``activemq.subscriptionName`` on SUBSCRIBE), so the broker keeps persistent messages while
  nettel is away;
- ``virtual``: ActiveMQ virtual-topic consumer queues ``/queue/Consumer.<client-id>.<topic>``
  (the operator must publish to ``VirtualTopic.*`` topics);
- ``plain``: ordinary topic subscriptions; whatever is published while disconnected is lost.

With ``ack="client"`` frames are acknowledged only through `acknowledge` (cumulatively, per
subscription), which the persistence layer calls once a snapshot holds what they carried.

With `tls` every broker is reached over TLS (ActiveMQ's ``stomp+ssl`` connector): the broker's
certificate must chain to the given CA file (or to the system's CAs) and name the host as it
is written in the broker list; a client certificate is presented when one is given. The STOMP
passcode is only ever sent in the CONNECT frame and never logged.
"""

from __future__ import annotations

import fcntl
import logging
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import stomp
from stomp.exception import StompException

from service.broker_link import Address, TlsFiles, backoff_seconds, enable_tls
from service.ingest.ack_token import AckToken
from service.ingest.stomp_transport import BufferedConnection12


@dataclass(frozen=True)
class SubscriptionSpec:
    mode: Literal["durable", "virtual", "plain"] = "durable"
    client_id: str = "nettel"
    ack: Literal["auto", "client"] = "auto"
    prefetch: int = 1000


#: An arrival lag beyond this is no lag but a `timestamp` header in another sense or unit.
PLAUSIBLE_LAG_SECONDS = 86_400.0

FrameHandler = Callable[[str, bytes, AckToken | None], object]


class _Listener(stomp.ConnectionListener):
    def __init__(self, source: StompSource) -> None:
        self._source = source

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self._source.deliver(frame.headers, frame.body)

    def on_disconnected(self) -> None:
        self._source.mark_disconnected()

    def on_heartbeat_timeout(self) -> None:
        self._source.mark_disconnected()


class StompSource:
    """Subscribes to `topics`; calls `handler(topic, body, ack)` on stomp.py's receiver thread."""

    def __init__(
        self,
        brokers: Sequence[Address],
        topics: Sequence[str],
        handler: FrameHandler,
        *,
        subscription: SubscriptionSpec = SubscriptionSpec(),
        user: str | None = None,
        passcode: str | None = None,
        heartbeat_ms: int = 10_000,
        max_backoff_seconds: float = 5.0,
        log: logging.Logger | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        self._brokers = list(brokers)
        self._tls = tls
        self._topics = list(topics)
        self._handler = handler
        self._subscription = subscription
        self._generation = 0
        self._disconnected_since: float | None = time.monotonic()
        self._disconnected_total = 0.0
        self._credentials = (user, passcode)
        self._heartbeat_ms = heartbeat_ms
        self._max_backoff = max_backoff_seconds
        self._log = log or logging.getLogger("nettel.stomp")
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._connected = threading.Event()
        self._paused = threading.Event()
        self._connection: BufferedConnection12 | None = None
        self._last_stamp: tuple[str | None, float] = (None, 0.0)  # last `timestamp`, arrival
        self._thread = threading.Thread(
            target=self._supervise, name="stomp-supervisor", daemon=True
        )

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def disconnected_seconds(self) -> float:
        """Total time without a broker connection since start (including now, if down)."""
        since = self._disconnected_since
        return self._disconnected_total + (time.monotonic() - since if since is not None else 0.0)

    def unread_bytes(self) -> int:
        """Bytes the broker has sent that wait unread in the socket (0 when unknown).

        Many mean the receiver is behind: a back-fill is being worked off at the broker's side,
        where no queue of ours can see it.
        """
        socket = getattr(getattr(self._connection, "transport", None), "socket", None)
        if socket is None:
            return 0
        try:
            waiting = fcntl.ioctl(socket.fileno(), termios.FIONREAD, bytes(4))
        except (OSError, ValueError):  # closed meanwhile
            return 0
        return int.from_bytes(waiting, sys.byteorder, signed=True)

    def arrival_lag_seconds(self) -> float | None:
        """How long the last message took from the broker to here: its arrival time minus its
        `timestamp` header, which ActiveMQ sets (ms since the epoch, by the broker's clock) when
        the producer did not. None before such a message, and for a stamp over a day off
        (another unit, or no clock at all).

        Large means the messages arriving now waited at the broker: a backlog is being worked
        off there, and the receiver may keep up with how fast the broker hands it out.
        """
        sent, arrived = self._last_stamp
        if not sent or not sent.isdigit():
            return None
        lag = arrived - int(sent) / 1000
        return lag if abs(lag) < PLAUSIBLE_LAG_SECONDS else None

    def acknowledge(self, tokens: Iterable[AckToken]) -> int:
        """Ack frames received on the current connection; older ones will be redelivered anyway."""
        connection, acked = self._connection, 0
        for token in tokens:
            if connection is None or token.generation != self._generation:
                continue
            try:
                connection.ack(token.ack_id)
                acked += 1
            except (StompException, OSError):
                self._log.warning("acknowledgement failed; the broker will redeliver")
        return acked

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        self._disconnect()

    def pause(self) -> None:
        """Stop handing frames on; those arriving now stay unacknowledged and are redelivered."""
        self._paused.set()

    def deliver(self, headers: dict[str, str], body: bytes | str) -> None:
        if self._paused.is_set():
            return
        self._last_stamp = (headers.get("timestamp"), time.time())
        topic = self._topic_of(headers)
        ack_id = headers.get("ack") or headers.get("message-id")
        token = None
        if self._subscription.ack == "client" and ack_id:
            token = AckToken(self._generation, headers.get("subscription", ""), ack_id)
        try:
            self._handler(topic, body if isinstance(body, bytes) else body.encode(), token)
        except Exception:  # the consumer must outlive any bug in a handler
            self._log.exception("frame handler failed", extra={"destination": topic})

    def mark_disconnected(self) -> None:
        if self._connected.is_set():
            self._log.warning("broker connection lost")
            self._disconnected_since = time.monotonic()
        self._connected.clear()
        self._wake.set()

    def _topic_of(self, headers: dict[str, str]) -> str:
        """The configured topic of a frame (virtual-topic queues map back by subscription id)."""
        subscription = headers.get("subscription", "")
        if subscription.isdigit() and int(subscription) < len(self._topics):
            return self._topics[int(subscription)]
        return headers.get("destination", "")

    def _supervise(self) -> None:
        failures = 0
        while not self._stop.is_set():
            if not self._connected.is_set():
                failures = 0 if self._try_connect() else failures + 1
            self._wake.clear()
            self._wake.wait(backoff_seconds(failures, self._max_backoff) if failures else 1.0)

    def _try_connect(self) -> bool:
        self._disconnect()
        connection = BufferedConnection12(
            self._brokers,
            heartbeats=(self._heartbeat_ms, self._heartbeat_ms),
            reconnect_attempts_max=1,
        )
        connection.set_listener("nettel", _Listener(self))
        if self._tls is not None:
            enable_tls(connection, self._brokers, self._tls)
        user, passcode = self._credentials
        spec = self._subscription
        connect_headers = {"client-id": spec.client_id} if spec.mode == "durable" else {}
        self._generation += 1
        try:
            connection.connect(user, passcode, wait=True, headers=connect_headers)
            for number, topic in enumerate(self._topics):
                destination, headers = subscription_target(spec, topic, number)
                connection.subscribe(destination, id=str(number), ack=spec.ack, headers=headers)
        except (StompException, OSError) as error:
            self._log.warning(
                "broker connect failed",
                extra={"error": type(error).__name__, "tls": self._tls is not None},
            )
            return False
        self._connection = connection
        if self._disconnected_since is not None:
            self._disconnected_total += time.monotonic() - self._disconnected_since
            self._disconnected_since = None
        self._connected.set()
        self._log.info("broker connected", extra={"topics": self._topics, "mode": spec.mode})
        return True

    def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        self._connected.clear()
        if connection is not None:
            try:
                connection.disconnect()
            except (StompException, OSError):
                pass


def subscription_target(spec: SubscriptionSpec, topic: str, number: int) -> tuple[str, dict]:
    """Destination and SUBSCRIBE headers for `topic` in the configured mode."""
    headers = {"activemq.prefetchSize": str(spec.prefetch)}
    if spec.mode == "durable":
        headers["activemq.subscriptionName"] = f"{spec.client_id}-{number}"
        return topic, headers
    if spec.mode == "virtual":
        name = topic.removeprefix("/topic/")
        return f"/queue/Consumer.{spec.client_id}.{name}", headers
    return topic, headers
