"""STOMP consumer: keeps a subscription on one of the configured brokers and feeds frames on.

`broker.link.BrokerLink` keeps the connection (failover, TLS, heart-beats, reconnecting with
capped backoff and jitter); this module subscribes each time it connects, in one of the modes:

- ``durable`` (default): ActiveMQ durable topic subscriptions (``client-id`` on CONNECT,
  ``activemq.subscriptionName`` on SUBSCRIBE), so the broker keeps persistent messages while
  nettel is away;
- ``virtual``: ActiveMQ virtual-topic consumer queues ``/queue/Consumer.<client-id>.<topic>``
  (the operator must publish to ``VirtualTopic.*`` topics);
- ``plain``: ordinary topic subscriptions; whatever is published while disconnected is lost.

With ``ack="client"`` frames are acknowledged only through `acknowledge` (cumulatively, per
subscription), which the persistence layer calls once a snapshot holds what they carried.
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

from service.broker.link import BrokerLink, TlsFiles
from service.broker.stomp_transport import BufferedConnection12
from service.config import Address
from service.ingest.ack_token import AckToken


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
        self._topics = list(topics)
        self._handler = handler
        self._subscription = subscription
        self._generation = 0  # of the connection, counted when it subscribes
        self._log = log or logging.getLogger("nettel.stomp")
        self._paused = threading.Event()
        self._last_stamp: tuple[str | None, float] = (None, 0.0)  # last `timestamp`, arrival
        durable = subscription.mode == "durable"
        self._link = BrokerLink(
            brokers,
            user=user,
            passcode=passcode,
            heartbeat_ms=heartbeat_ms,
            tls=tls,
            connect_headers={"client-id": subscription.client_id} if durable else None,
            listener=_Listener(self),
            on_connect=self._subscribe,
            max_backoff_seconds=max_backoff_seconds,
            label="broker",
            log=self._log,
            log_extra={"topics": self._topics, "mode": subscription.mode},
        )

    @property
    def connected(self) -> bool:
        return self._link.connected

    def disconnected_seconds(self) -> float:
        """Total time without a broker connection since start (including now, if down)."""
        return self._link.disconnected_seconds()

    def unread_bytes(self) -> int:
        """Bytes the broker has sent that wait unread in the socket (0 when unknown).

        Many mean the receiver is behind: a back-fill is being worked off at the broker's side,
        where no queue of ours can see it.
        """
        connection = self._link.connection
        socket = None if connection is None else connection.transport.socket
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
        connection, acked = self._link.connection, 0
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
        self._link.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._link.stop(timeout)

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

    def _topic_of(self, headers: dict[str, str]) -> str:
        """The configured topic of a frame (virtual-topic queues map back by subscription id)."""
        subscription = headers.get("subscription", "")
        if subscription.isdigit() and int(subscription) < len(self._topics):
            return self._topics[int(subscription)]
        return headers.get("destination", "")

    def _subscribe(self, connection: BufferedConnection12) -> None:
        """BrokerLink's step after CONNECT: subscribe to every topic on the new connection."""
        self._generation += 1
        spec = self._subscription
        for number, topic in enumerate(self._topics):
            destination, headers = subscription_target(spec, topic, number)
            connection.subscribe(destination, id=str(number), ack=spec.ack, headers=headers)


def subscription_target(
    spec: SubscriptionSpec, topic: str, number: int
) -> tuple[str, dict[str, str]]:
    """Destination and SUBSCRIBE headers for `topic` in the configured mode."""
    headers = {"activemq.prefetchSize": str(spec.prefetch)}
    if spec.mode == "durable":
        headers["activemq.subscriptionName"] = f"{spec.client_id}-{number}"
        return topic, headers
    if spec.mode == "virtual":
        name = topic.removeprefix("/topic/")
        return f"/queue/Consumer.{spec.client_id}.{name}", headers
    return topic, headers
