"""STOMP consumer: keeps a subscription on one of the configured brokers and feeds frames on.

`broker.link.BrokerLink` keeps the connection (failover, vhost, TLS, heart-beats, reconnecting
with capped backoff and jitter); this module subscribes each time it connects, in one of the
modes, with the headers of the broker's flavour (`broker.flavour`: configured, or named by the
CONNECTED frame), built by `subscription_target`:

- ``durable`` (default): the broker keeps persistent messages while nettel is away. ActiveMQ:
  ``client-id`` on CONNECT, ``activemq.subscriptionName`` on SUBSCRIBE. RabbitMQ: a named
  durable queue bound to the topic (``durable:true``, ``auto-delete:false``, ``x-queue-name``
  ``<client-id>.<topic>``), after taking the exclusive queue ``nettel.client.<client-id>``,
  which RabbitMQ grants one connection at a time (a second replica with the same client id is
  refused instead of splitting the feed with the first). Artemis: ``client-id`` and
  ``durable-subscription-name``, multicast;
- ``virtual``: ActiveMQ virtual-topic consumer queues ``/queue/Consumer.<client-id>.<topic>``
  (the operator must publish to ``VirtualTopic.*`` topics); other brokers refuse it;
- ``plain``: ordinary topic subscriptions; whatever is published while disconnected is lost.

With ``ack="client"`` frames are acknowledged only through `acknowledge`, which the persistence
layer calls once what they carried is safe: on ActiveMQ in STOMP's ``client`` mode (cumulative,
so the last frame of each subscription stands for the ones before it), on RabbitMQ and Artemis
in ``client-individual`` mode (every frame its own ACK). Either way the broker stops delivering
at ``prefetch`` unacknowledged messages (Artemis: a window of ``prefetch`` x 2 KiB).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from service.broker.ack_token import AckToken
from service.broker.connection import (
    BrokerAccess,
    BrokerConnection,
    BrokerError,
    ConnectionListener,
    Frame,
)
from service.broker.flavour import Flavour, resolve_flavour
from service.broker.link import BrokerLink
from service.config import BrokerFlavour
from service.ingest.backlog import ArrivalLag
from service.ingest.entry import LiveBatch
from service.ingest.source import LiveDelivery, SourceDescription


@dataclass(frozen=True)
class SubscriptionSpec:
    mode: Literal["durable", "virtual", "plain"] = "durable"
    client_id: str = "nettel"
    ack: Literal["auto", "client"] = "auto"
    prefetch: int = 1000
    flavour: BrokerFlavour = "auto"


@dataclass(frozen=True)
class Subscription:
    """One SUBSCRIBE frame: destination, STOMP ack mode and the broker-specific headers."""

    destination: str
    ack: Literal["auto", "client", "client-individual"]
    headers: dict[str, str]


class SubscriptionRefused(BrokerError):
    """The broker cannot take the configured subscription (e.g. virtual topics on RabbitMQ)."""


#: Artemis counts its consumer window in bytes: this many per prefetched message (a perfSONAR
#: message is about 1.7 KB on average).
ARTEMIS_BYTES_PER_MESSAGE = 2048


#: Receipts waited for after CONNECT: the client id's lock queue (RabbitMQ), and the last topic
#: SUBSCRIBE. A broker handles one connection's frames in order, so that receipt means every
#: subscription is in place (RabbitMQ's queues declared and bound) before the link counts as
#: connected and /readyz says ready: nothing published after "ready" misses nettel's queues.
CLIENT_LOCK_RECEIPT = "nettel-client-id-lock"
SUBSCRIBED_RECEIPT = "nettel-subscribed"
RECEIPT_TIMEOUT = 10.0


class _Listener(ConnectionListener):
    def __init__(self, source: StompSource) -> None:
        self._source = source
        self._receipts: dict[str, threading.Event] = {}
        self.refusal: str | None = None  # the message of the broker's last ERROR frame

    def on_message(self, frame: Frame) -> None:
        self._source.deliver(frame.headers, frame.body)

    def on_error(self, frame: Frame) -> None:
        self.refusal = frame.headers.get("message") or str(frame.body)[:200]
        for answered in self._receipts.values():  # no receipt follows a refused frame
            answered.set()

    def on_receipt(self, frame: Frame) -> None:
        answered = self._receipts.get(frame.headers.get("receipt-id", ""))
        if answered is not None:
            answered.set()

    def expect(self, receipt: str) -> threading.Event:
        """A fresh event, set when the broker's RECEIPT for `receipt` arrives; forgets the last
        ERROR frame's message."""
        self.refusal = None
        answered = self._receipts[receipt] = threading.Event()
        return answered


class StompSource:
    """The bus source: subscribes to `topics` and delivers each frame to `entry` on the
    connection's receiving thread (blocking while ingest's queue is full, which pushes back on
    the broker)."""

    name = "bus"

    def __init__(
        self,
        access: BrokerAccess,
        topics: Sequence[str],
        entry: LiveDelivery,
        *,
        subscription: SubscriptionSpec = SubscriptionSpec(),
        max_backoff_seconds: float = 5.0,
        log: logging.Logger | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not topics:
            raise ValueError("a StompSource needs at least one topic")
        self._topics = list(topics)
        self._clock = clock  # the wall clock messages' arrival is read on (`timestamp` is one)
        self._entry = entry
        self._subscription = subscription
        self._generation = 0  # of the connection, counted when it subscribes
        self._cumulative = True  # the current connection's acks cover the frames before them
        self._log = log or logging.getLogger("nettel.stomp")
        self._paused = threading.Event()
        self._arrival_lag = ArrivalLag()
        durable = subscription.mode == "durable"
        self._listener = _Listener(self)
        self._link = BrokerLink(
            access,
            connect_headers={"client-id": subscription.client_id} if durable else None,
            listener=self._listener,
            on_connect=self._subscribe,
            max_backoff_seconds=max_backoff_seconds,
            label="broker",
            log=self._log,
            log_extra={"topics": self._topics, "mode": subscription.mode},
        )

    @property
    def connected(self) -> bool:
        """Subscribed, and no frame stuck half-read (`BrokerLink.stuck`): /readyz's test."""
        return self._link.connected and not self._link.stuck

    @property
    def dropped(self) -> dict[str, int]:
        """Connections dropped by nettel itself, by reason (a frame that did not end in time)."""
        return dict(self._link.dropped)

    @property
    def frames_cut(self) -> int:
        """Frames longer than the receive bound, kept only in part (then refused `too_large`)."""
        return self._link.frames_cut

    @property
    def connections(self) -> int:
        """Broker connections made since start (a reconnect adds one)."""
        return self._link.connections

    def disconnected_seconds(self) -> float:
        """Total time without a broker connection since start (including now, if down)."""
        return self._link.disconnected_seconds()

    def unread_bytes(self) -> int:
        """Bytes the broker has sent that wait unread on our side (0 when unknown or down).

        Many mean the receiver is behind: a back-fill is being worked off at the broker's side,
        where no queue of ours can see it.
        """
        connection = self._link.connection
        return 0 if connection is None else connection.unread_bytes()

    def arrival_lag_seconds(self) -> float | None:
        """How long messages took from the broker to here (`ArrivalLag`: the least of the last
        second or two, by the `timestamp` header ActiveMQ sets when the producer did not).

        Large means the messages arriving now waited at the broker: a backlog is being worked
        off there, and the receiver may keep up with how fast the broker hands it out.
        """
        return self._arrival_lag.seconds()

    def acknowledge(self, tokens: Iterable[AckToken]) -> int:
        """Ack frames received on the current connection (older ones will be redelivered
        anyway), in order: every one, or with cumulative acks the last of each subscription;
        returns how many ACK frames went out."""
        connection, generation = self._link.connection, self._generation
        current = [token for token in tokens if token.generation == generation]
        if connection is None or not current:
            return 0
        if self._cumulative:
            current = list({token.subscription: token for token in current}.values())
        try:
            connection.ack_all(token.ack_id for token in current)
        except (BrokerError, OSError):
            self._log.warning("acknowledgement failed; the broker will redeliver")
            return 0
        return len(current)

    def describe(self) -> SourceDescription:
        return SourceDescription(
            kind="bus",
            reads=tuple(self._topics),
            running=self._link.connected and not self._paused.is_set(),
            detail={
                "mode": self._subscription.mode,
                "connected": self.connected,
                "connections": self.connections,
            },
        )

    def connect(self) -> None:
        """Keep a subscription from now on (frames are handed on from the first one)."""
        self._link.start()

    def disconnect(self, timeout: float = 5.0) -> None:
        self._link.stop(timeout)

    def start(self) -> None:
        """Hand frames on (as from `connect`; again after a `stop`)."""
        self._paused.clear()

    def stop(self) -> None:
        """Stop handing frames on, still connected (acknowledgements of what was handed on can
        go out); frames arriving now stay unacknowledged and are redelivered."""
        self._paused.set()

    def deliver(self, headers: dict[str, str], body: bytes | str) -> None:
        if self._paused.is_set():
            return
        self._arrival_lag.observe(headers.get("timestamp"), self._clock())
        topic = self._topic_of(headers)
        ack_id = headers.get("ack") or headers.get("message-id")
        token = None
        if self._subscription.ack == "client" and ack_id:
            token = AckToken(self._generation, headers.get("subscription", ""), ack_id, self)
        try:
            frame = (topic, body if isinstance(body, bytes) else body.encode(), token)
            self._entry.deliver(LiveBatch((frame,)))
        except Exception:  # the consumer must outlive any bug in the pipeline
            self._log.exception("frame delivery failed", extra={"destination": topic})

    def _topic_of(self, headers: dict[str, str]) -> str:
        """The configured topic of a frame (virtual-topic queues map back by subscription id)."""
        subscription = headers.get("subscription", "")
        if subscription.isdigit() and int(subscription) < len(self._topics):
            return self._topics[int(subscription)]
        return headers.get("destination", "")

    def _subscribe(self, connection: BrokerConnection) -> None:
        """BrokerLink's step after CONNECT: subscribe to every topic on the new connection."""
        spec = self._subscription
        flavour, guessed = resolve_flavour(spec.flavour, connection.server)
        if guessed:
            self._log.warning(
                "broker flavour unknown; subscribing as to ActiveMQ (set --broker-flavour)",
                extra={"server": connection.server},
            )
        targets = [subscription_target(spec, t, n, flavour) for n, t in enumerate(self._topics)]
        if flavour == "rabbitmq" and spec.mode == "durable":
            self._lock_client_id(connection, spec.client_id)
        self._generation += 1
        self._cumulative = all(target.ack == "client" for target in targets)
        subscribed = self._listener.expect(SUBSCRIBED_RECEIPT)
        for number, target in enumerate(targets):
            last = number == len(targets) - 1
            headers = {**target.headers, "receipt": SUBSCRIBED_RECEIPT} if last else target.headers
            connection.subscribe(
                target.destination, id=str(number), ack=target.ack, headers=headers
            )
        answered, refusal = subscribed.wait(RECEIPT_TIMEOUT), self._listener.refusal
        if refusal is not None or not answered:
            destinations = ", ".join(target.destination for target in targets)
            raise SubscriptionRefused(
                f"SUBSCRIBE to {destinations} "
                + (f"refused: {refusal}" if refusal else "unanswered")
            )

    def _lock_client_id(self, connection: BrokerConnection, client_id: str) -> None:
        """RabbitMQ takes any number of consumers on one durable queue (they would split the
        feed), so a replica first declares the exclusive queue ``nettel.client.<client-id>``,
        which the broker grants one connection at a time: another holding it is refused."""
        listener = self._listener
        answered = listener.expect(CLIENT_LOCK_RECEIPT)
        lock = f"/queue/nettel.client.{client_id}"
        headers = {"exclusive": "true", "durable": "false", "auto-delete": "true"}
        headers["receipt"] = CLIENT_LOCK_RECEIPT
        connection.subscribe(lock, id="client-id-lock", ack="auto", headers=headers)
        if not answered.wait(RECEIPT_TIMEOUT):
            raise SubscriptionRefused(f"no answer to SUBSCRIBE {lock}")
        if listener.refusal is not None:
            raise SubscriptionRefused(
                f"client id {client_id} is in use by another connection ({listener.refusal}): "
                "give every replica its own --client-id"
            )


def subscription_target(
    spec: SubscriptionSpec, topic: str, number: int, flavour: Flavour
) -> Subscription:
    """The SUBSCRIBE frame for `topic` (subscription `number`) in the configured mode on a
    broker of `flavour`; SubscriptionRefused when that broker has no such mode.

    >>> spec = SubscriptionSpec(client_id="nettel-a", ack="client", prefetch=500)
    >>> subscription_target(spec, "/topic/perfsonar.raw.packet-loss-rate", 1, "rabbitmq")
    ... # doctest: +NORMALIZE_WHITESPACE
    Subscription(destination='/topic/perfsonar.raw.packet-loss-rate', ack='client-individual',
        headers={'prefetch-count': '500', 'durable': 'true', 'auto-delete': 'false',
                 'x-queue-name': 'nettel-a.perfsonar.raw.packet-loss-rate'})
    """
    explicit = spec.ack == "client"
    if flavour == "activemq":
        return _activemq_target(spec, topic, number, explicit)
    if spec.mode == "virtual":
        raise SubscriptionRefused(
            f"subscription virtual needs ActiveMQ's virtual topics; the broker is {flavour}: "
            "use --subscription durable"
        )
    ack: Literal["auto", "client-individual"] = "client-individual" if explicit else "auto"
    durable = spec.mode == "durable"
    if flavour == "rabbitmq":
        headers = {"prefetch-count": str(spec.prefetch)}
        if durable:  # booleans as the lowercase strings RabbitMQ takes
            queue = f"{spec.client_id}.{_topic_name(topic)}"
            headers |= {"durable": "true", "auto-delete": "false", "x-queue-name": queue}
        return Subscription(topic, ack, headers)
    headers = {"consumer-window-size": str(spec.prefetch * ARTEMIS_BYTES_PER_MESSAGE)}
    if durable:
        name = f"{spec.client_id}-{number}"
        headers |= {"durable-subscription-name": name, "subscription-type": "MULTICAST"}
    return Subscription(topic, ack, headers)


def _activemq_target(
    spec: SubscriptionSpec, topic: str, number: int, explicit: bool
) -> Subscription:
    headers = {"activemq.prefetchSize": str(spec.prefetch)}
    ack: Literal["auto", "client"] = "client" if explicit else "auto"
    if spec.mode == "durable":
        headers["activemq.subscriptionName"] = f"{spec.client_id}-{number}"
    elif spec.mode == "virtual":
        name = topic.removeprefix("/topic/")
        return Subscription(f"/queue/Consumer.{spec.client_id}.{name}", ack, headers)
    return Subscription(topic, ack, headers)


def _topic_name(destination: str) -> str:
    """`/topic/a.b` -> `a.b`; other destinations with their slashes as dots.

    >>> _topic_name("/topic/perfsonar.raw.x"), _topic_name("/exchange/amq.topic/perfsonar.raw.x")
    ('perfsonar.raw.x', 'exchange.amq.topic.perfsonar.raw.x')
    """
    return destination.removeprefix("/topic/").strip("/").replace("/", ".")
