"""An in-memory STOMP broker that acts as ActiveMQ or RabbitMQ do for what nettel uses of them.

`MemoryBroker(flavour)` keeps topics, queues and subscriptions in this process; its `connector`
makes `memory_connection.MemoryConnection`s, so any `BrokerAccess(..., connector=broker.connector)`
user (the feed's subscription, the HA election, the telemetry publisher, a whole runtime built
with `build_runtime(settings, broker_connector=broker.connector)`) runs against it. The contract
suite (tests/broker/test_connection_contract.py) runs the same tests on it and on the real
brokers; what it does:

- destinations: ``/topic/NAME`` (every subscription gets a copy; a plain one only of what is
  sent while it is there), ``/queue/NAME`` (created on use, kept; each message to one consumer,
  round robin), RabbitMQ's ``/amq/queue/NAME`` (only a queue declared before: `declare_queue`);
- durable subscriptions, which keep what is sent while their subscriber is away: ActiveMQ's
  (``client-id`` on CONNECT, ``activemq.subscriptionName``; a client id is held by one
  connection at a time, a second CONNECT with it is refused) and RabbitMQ's (``durable:true``
  with ``x-queue-name``: a named queue bound to the topic);
- one consumer at a time: ActiveMQ's exclusive consumer (``activemq.exclusive:true``), a queue
  declared with RabbitMQ's ``x-single-active-consumer``, RabbitMQ's exclusive queue
  (``exclusive:true``: one connection's; another's SUBSCRIBE is refused ``resource_locked``);
- acknowledgement: ``auto``, ``client`` (an ACK covers the subscription's earlier messages) and
  ``client-individual``; prefetch (``activemq.prefetchSize``, ``prefetch-count``) bounds the
  unacknowledged messages of a subscription; unacknowledged messages go back to their queue,
  first in line and marked ``redelivered:true``, when their subscription or connection ends; a
  NACK requeues the message at once (RabbitMQ) or dead-letters it (ActiveMQ: a persistent one to
  ``/queue/ActiveMQ.DLQ``, with ``original-destination``; a non-persistent one is dropped);
- expiry (ActiveMQ's ``expires``, epoch ms; RabbitMQ's ``expiration``, ms from sending): an
  expired message is dropped instead of delivered;
- receipts for every frame that asks, ERROR frames for refused ones (with the real brokers'
  reasons for the refusals above; RabbitMQ then closes the connection, as it does);
- faults a test injects: `stop` and `start` (the broker's loss: connections end, connecting is
  refused; durable queues keep their persistent messages), `freeze` and `thaw` (a broker that
  stops answering: connections with heart-beats time out after their grace), `drop_connections`
  (the network: connections end, the broker stays), `refuse_next` (an ERROR frame for the next
  frame of a command).

Not modelled: virtual topics, transactions, wildcards, message selectors, priorities, vhosts
and TLS (nothing travels), a size bound (bodies are kept as sent).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from service.broker.connection import AckMode, BrokerAccess, BrokerError
from service.broker.memory_connection import MemoryConnection, MemoryFrame

BrokerFlavour = Literal["activemq", "rabbitmq"]

#: The CONNECTED frame's `server` header: names the flavour as `broker.flavour` reads it.
SERVERS: dict[BrokerFlavour, str] = {
    "activemq": "ActiveMQ/memory (nettel in-memory broker)",
    "rabbitmq": "RabbitMQ/memory (nettel in-memory broker)",
}
#: Where ActiveMQ puts a persistent message that was NACKed.
DEAD_LETTER_QUEUE = "ActiveMQ.DLQ"
#: The broker address a `MemoryBroker.access` names (nothing listens there).
MEMORY_ADDRESS = ("memory", 0)
#: How long a CONNECT to a frozen broker waits before it fails.
FROZEN_CONNECT_SECONDS = 10.0


class _Refused(Exception):
    """A frame the broker refuses: its ERROR frame's `message` header and body."""

    def __init__(self, message: str, body: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.body = body or message


@dataclass(eq=False, slots=True)
class _Message:
    id: str
    destination: str
    headers: dict[str, str]
    body: bytes
    persistent: bool
    expires_at: float | None  # epoch seconds
    redelivered: bool = False


@dataclass(eq=False)
class _Queue:
    name: str
    #: Kept without consumers, and across a restart with its persistent messages.
    durable: bool = True
    #: Deleted when its last consumer leaves.
    auto_delete: bool = False
    #: Every message to one consumer while it is there (the first exclusive one, or the first).
    single_active: bool = False
    #: The connection an exclusive (RabbitMQ) queue belongs to; it ends with it.
    owner: MemoryConnection | None = None
    topic: str | None = None  # the topic it is bound to
    messages: deque[_Message] = field(default_factory=deque)
    consumers: list[_Subscription] = field(default_factory=list)
    turn: int = 0


@dataclass(eq=False)
class _Subscription:
    connection: MemoryConnection
    id: str
    queue: _Queue
    ack: AckMode
    prefetch: int | None
    exclusive: bool
    #: Its queue is its own (a plain topic subscription): deleted with it.
    temporary: bool
    #: Delivered, not yet acknowledged, by ack id, in the order delivered.
    unacked: dict[str, _Message] = field(default_factory=dict)

    def has_room(self) -> bool:
        return self.ack == "auto" or self.prefetch is None or len(self.unacked) < self.prefetch


class MemoryBroker:
    """An in-memory broker of `flavour` (see the module); thread-safe. `clock` is the wall clock
    that timestamps and expires messages; `server` the CONNECTED frame's `server` header (by
    default one that names the flavour)."""

    def __init__(
        self,
        flavour: BrokerFlavour = "activemq",
        *,
        server: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.flavour = flavour
        self.server = server if server is not None else SERVERS[flavour]
        self._clock = clock
        self._lock = threading.Lock()
        self._thawed = threading.Condition(self._lock)
        self._running = True
        self._frozen = False
        self._held: list[Callable[[], None]] = []  # frames that came in while frozen
        self._timers: list[threading.Timer] = []
        self._refusals: dict[str, str] = {}  # command -> message of its next ERROR
        self._connections: dict[MemoryConnection, dict[str, _Subscription]] = {}
        self._queues: dict[str, _Queue] = {}
        self._bindings: dict[str, list[_Queue]] = {}  # topic -> the queues that get its messages
        self._numbers = itertools.count(1)

    # Making connections.

    def connector(self, access: BrokerAccess) -> MemoryConnection:
        """The `Connector` of this broker: a connection (not yet connected) to it."""
        return MemoryConnection(self, access)

    def access(self, **options: object) -> BrokerAccess:
        """A `BrokerAccess` whose connections are this broker's (`options`: its other fields)."""
        return BrokerAccess((MEMORY_ADDRESS,), connector=self.connector, **options)  # type: ignore[arg-type]

    @property
    def connections(self) -> int:
        """Connections open now."""
        with self._lock:
            return len(self._connections)

    def consumers(self, name: str) -> int:
        """Subscriptions reading queue `name` now (0 for no such queue)."""
        with self._lock:
            queue = self._queues.get(name)
            return 0 if queue is None else len(queue.consumers)

    def declare_queue(self, name: str, arguments: Mapping[str, object] | None = None) -> None:
        """Declare durable queue `name` as an operator would (RabbitMQ: `/amq/queue/NAME`);
        ``x-single-active-consumer: true`` makes it deliver to one consumer at a time."""
        with self._lock:
            queue = self._queues.get(name) or self._add(_Queue(name))
            queue.single_active = bool((arguments or {}).get("x-single-active-consumer"))

    # Faults.

    def stop(self) -> None:
        """The broker goes away: every connection ends (listeners hear it), CONNECT is refused
        until `start`; durable queues keep their persistent messages, the rest is lost."""
        with self._lock:
            self._running = False
            for connection in list(self._connections):
                self._detach(connection)
                connection.lost()
            for queue in list(self._queues.values()):
                if not queue.durable or queue.owner is not None:
                    self._delete(queue)
                else:
                    kept = [message for message in queue.messages if message.persistent]
                    queue.messages = deque(kept)

    def start(self) -> None:
        """Back after `stop`: CONNECT is taken again."""
        with self._lock:
            self._running = True

    def freeze(self) -> None:
        """The broker stops answering (a stopped process, a dead network path) but connections
        stay open: nothing is delivered or taken, CONNECT waits; each connection with heart-beats
        ends with a heart-beat timeout after its grace (`BrokerAccess.heartbeat_grace_seconds`)."""
        with self._lock:
            self._frozen = True
            for connection in self._connections:
                grace = connection.access.heartbeat_grace_seconds
                if grace:
                    timer = threading.Timer(grace, self._heartbeat_timeout, (connection,))
                    timer.daemon = True
                    timer.start()
                    self._timers.append(timer)

    def thaw(self) -> None:
        """Answering again: frames that came meanwhile are taken, in order."""
        with self._lock:
            self._frozen = False
            for timer in self._timers:
                timer.cancel()
            self._timers.clear()
            held, self._held = self._held, []
            for step in held:
                step()
            for queue in list(self._queues.values()):
                self._dispatch(queue)
            self._thawed.notify_all()

    def drop_connections(self) -> None:
        """The network drops every connection; the broker stays up."""
        with self._lock:
            for connection in list(self._connections):
                self._detach(connection)
                connection.lost()

    def refuse_next(self, command: str, message: str) -> None:
        """Answer the next `command` frame (CONNECT, SUBSCRIBE, SEND, ...) of any connection with
        an ERROR frame saying `message` instead of taking it."""
        with self._lock:
            self._refusals[command.upper()] = message

    # What connections call.

    def open(self, connection: MemoryConnection, headers: dict[str, str]) -> str | None:
        """CONNECT: the `server` header of CONNECTED; BrokerError with the ERROR frame's
        reason (after posting it) when refused, ConnectionRefusedError while stopped."""
        with self._lock:
            if self._frozen and not self._thawed.wait_for(
                lambda: not self._frozen, FROZEN_CONNECT_SECONDS
            ):
                raise TimeoutError("the broker did not answer CONNECT")
            if not self._running:
                raise ConnectionRefusedError("the in-memory broker is stopped")
            try:
                self._take_refusal("CONNECT")
                client_id = headers.get("client-id") if self.flavour == "activemq" else None
                if client_id and any(c.client_id == client_id for c in self._connections):
                    raise _Refused(
                        f"Broker: memory - Client: {client_id} already connected",
                        "javax.jms.InvalidClientIDException",
                    )
            except _Refused as refusal:
                connection.post("error", _error_frame(refusal))
                raise BrokerError(refusal.message) from None
            connection.client_id = client_id
            self._connections[connection] = {}
            return self.server

    def close(self, connection: MemoryConnection) -> None:
        """DISCONNECT (or the socket closed by the client)."""
        with self._lock:
            self._detach(connection)

    def subscribe(
        self,
        connection: MemoryConnection,
        destination: str,
        id: str,
        ack: AckMode,
        headers: dict[str, str],
    ) -> None:
        def step() -> None:
            subscriptions = self._connections[connection]
            if id in subscriptions:
                raise _Refused(f"Duplicate subscription id {id}")
            subscription = self._new_subscription(connection, destination, id, ack, headers)
            subscriptions[id] = subscription
            subscription.queue.consumers.append(subscription)
            self._dispatch(subscription.queue)

        self._take(connection, "SUBSCRIBE", headers, step)

    def unsubscribe(self, connection: MemoryConnection, id: str) -> None:
        def step() -> None:
            subscription = self._connections[connection].pop(id, None)
            if subscription is None:
                raise _Refused(f"No subscription matched id {id}")
            self._end_subscription(subscription)

        self._take(connection, "UNSUBSCRIBE", {}, step)

    def send(
        self, connection: MemoryConnection, destination: str, body: bytes, headers: dict[str, str]
    ) -> None:
        def step() -> None:
            queues = self._queues_to_send_to(destination)
            message = self._new_message(destination, body, headers)
            for queue in queues:
                copy = message if len(queues) == 1 else _copy(message)
                queue.messages.append(copy)
                self._dispatch(queue)

        self._take(connection, "SEND", headers, step)

    def acknowledge(
        self,
        connection: MemoryConnection,
        ack_id: str,
        headers: dict[str, str],
        negative: bool = False,
    ) -> None:
        def step() -> None:
            subscription = next(
                (s for s in self._connections[connection].values() if ack_id in s.unacked), None
            )
            if subscription is None:
                raise _Refused(f"Unexpected {'NACK' if negative else 'ACK'} for ack id [{ack_id}]")
            taken = _take_acknowledged(subscription, ack_id)
            if negative:
                self._refuse_messages(subscription.queue, taken)
            self._dispatch(subscription.queue)

        self._take(connection, "NACK" if negative else "ACK", headers, step)

    # Inside (the lock held).

    def _take(
        self,
        connection: MemoryConnection,
        command: str,
        headers: Mapping[str, str],
        step: Callable[[], None],
    ) -> None:
        """Take one frame: run `step` now (or at `thaw`), then a RECEIPT if asked; an ERROR
        frame instead when refused."""

        def taken() -> None:
            if connection not in self._connections:
                return  # ended meanwhile: a frame sent into a dead socket
            receipt = headers.get("receipt")
            try:
                self._take_refusal(command)
                step()
            except _Refused as refusal:
                self._refused(connection, refusal, receipt)
                return
            if receipt is not None:
                connection.post("receipt", MemoryFrame("RECEIPT", {"receipt-id": receipt}))

        with self._lock:
            if connection not in self._connections:
                raise BrokerError("not connected", kind="NotConnectedException")
            if self._frozen:
                self._held.append(taken)
            else:
                taken()

    def _refused(
        self, connection: MemoryConnection, refusal: _Refused, receipt: str | None
    ) -> None:
        """Send the ERROR frame; RabbitMQ then answers the receipt and closes the connection,
        ActiveMQ names the receipt in the ERROR and keeps the connection."""
        frame = _error_frame(refusal)
        if self.flavour == "activemq":
            if receipt is not None:
                frame.headers["receipt-id"] = receipt
            connection.post("error", frame)
            return
        connection.post("error", frame)
        if receipt is not None:
            connection.post("receipt", MemoryFrame("RECEIPT", {"receipt-id": receipt}))
        self._detach(connection)
        connection.lost()

    def _take_refusal(self, command: str) -> None:
        message = self._refusals.pop(command, None)
        if message is not None:
            raise _Refused(message)

    def _heartbeat_timeout(self, connection: MemoryConnection) -> None:
        with self._lock:
            if not self._frozen or connection not in self._connections:
                return
            self._detach(connection)
            connection.lost(heartbeat_timeout=True)

    def _detach(self, connection: MemoryConnection) -> None:
        """The connection is gone: its subscriptions end, its exclusive queues go."""
        subscriptions = self._connections.pop(connection, None)
        if subscriptions is None:
            return
        for subscription in subscriptions.values():
            self._end_subscription(subscription)
        for queue in [q for q in self._queues.values() if q.owner is connection]:
            self._delete(queue)

    def _end_subscription(self, subscription: _Subscription) -> None:
        """Unacknowledged messages back to the front of the queue; the queue goes with a
        temporary or auto-delete subscription."""
        queue = subscription.queue
        queue.consumers.remove(subscription)
        returned = list(subscription.unacked.values())
        subscription.unacked.clear()
        for message in returned:
            message.redelivered = True
        queue.messages.extendleft(reversed(returned))
        if subscription.temporary or (queue.auto_delete and not queue.consumers):
            self._delete(queue)
        else:
            self._dispatch(queue)

    def _add(self, queue: _Queue) -> _Queue:
        self._queues[queue.name] = queue
        if queue.topic is not None:
            self._bindings.setdefault(queue.topic, []).append(queue)
        return queue

    def _delete(self, queue: _Queue) -> None:
        if self._queues.get(queue.name) is queue:
            del self._queues[queue.name]
        bound = self._bindings.get(queue.topic or "", [])
        if queue in bound:
            bound.remove(queue)
        for subscription in list(queue.consumers):
            self._connections.get(subscription.connection, {}).pop(subscription.id, None)
        queue.consumers.clear()

    def _new_subscription(
        self,
        connection: MemoryConnection,
        destination: str,
        id: str,
        ack: AckMode,
        headers: dict[str, str],
    ) -> _Subscription:
        kind, name = self._parse(destination)
        temporary = False
        if kind == "topic":
            queue, temporary = self._topic_queue(connection, name, headers)
        else:
            if self.flavour == "activemq" and "activemq.subscriptionName" in headers:
                raise _Refused(
                    "Invalid Subscription: cannot durably subscribe to a Queue destination!"
                )
            queue = self._existing(name) if kind == "amq-queue" else self._queue(name)
            if self.flavour == "rabbitmq" and headers.get("exclusive") == "true":
                self._take_exclusive(connection, queue, headers)
        prefetch_header = (
            "activemq.prefetchSize" if self.flavour == "activemq" else "prefetch-count"
        )
        prefetch = headers.get(prefetch_header)
        exclusive = self.flavour == "activemq" and headers.get("activemq.exclusive") == "true"
        return _Subscription(
            connection,
            id,
            queue,
            ack,
            int(prefetch) if prefetch and prefetch.isdigit() and int(prefetch) > 0 else None,
            exclusive,
            temporary,
        )

    def _topic_queue(
        self, connection: MemoryConnection, topic: str, headers: dict[str, str]
    ) -> tuple[_Queue, bool]:
        """The queue a topic subscription reads: a durable subscription's (kept), or its own."""
        name = None
        if self.flavour == "activemq" and (durable := headers.get("activemq.subscriptionName")):
            if not connection.client_id:
                raise _Refused("Cannot create a durable subscription without a client-id")
            name = f"durable:{connection.client_id}:{durable}"
        elif self.flavour == "rabbitmq" and headers.get("durable") == "true":
            name = headers.get("x-queue-name") or f"stomp-subscription-{next(self._numbers)}"
        if name is None:
            queue = _Queue(f"subscription-{next(self._numbers)}", durable=False, topic=topic)
            return self._add(queue), True
        queue = self._queues.get(name) or self._add(_Queue(name, topic=topic))
        if queue.consumers and self.flavour == "activemq":
            raise _Refused(f"Durable consumer is in use for client: {connection.client_id}")
        queue.auto_delete = headers.get("auto-delete") == "true"
        return queue, False

    def _take_exclusive(
        self, connection: MemoryConnection, queue: _Queue, headers: dict[str, str]
    ) -> None:
        if queue.owner is not None and queue.owner is not connection:
            raise _Refused(
                "resource_locked",
                f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue "
                f"'{queue.name}' in vhost '/'",
            )
        queue.owner = connection
        queue.durable = headers.get("durable") != "false"
        queue.auto_delete = headers.get("auto-delete") == "true"

    def _parse(self, destination: str) -> tuple[str, str]:
        """("topic" | "queue" | "amq-queue", name) of a destination; refused otherwise."""
        for prefix, kind in (("/topic/", "topic"), ("/queue/", "queue")):
            if destination.startswith(prefix) and len(destination) > len(prefix):
                return kind, destination.removeprefix(prefix)
        if self.flavour == "rabbitmq" and destination.startswith("/amq/queue/"):
            return "amq-queue", destination.removeprefix("/amq/queue/")
        raise _Refused(f"Unknown destination {destination}")

    def _queue(self, name: str) -> _Queue:
        return self._queues.get(name) or self._add(_Queue(name))

    def _existing(self, name: str) -> _Queue:
        queue = self._queues.get(name)
        if queue is None:
            raise _Refused("not_found", f"NOT_FOUND - no queue '{name}' in vhost '/'")
        return queue

    def _queues_to_send_to(self, destination: str) -> list[_Queue]:
        kind, name = self._parse(destination)
        if kind == "topic":
            return list(self._bindings.get(name, ()))
        return [self._existing(name) if kind == "amq-queue" else self._queue(name)]

    def _new_message(self, destination: str, body: bytes, headers: dict[str, str]) -> _Message:
        now = self._clock()
        kept = {k: v for k, v in headers.items() if k not in ("receipt", "content-length")}
        expires_at = None
        if self.flavour == "activemq":
            kept.setdefault("timestamp", str(int(now * 1000)))
            expires = kept.get("expires", "0")
            expires_at = int(expires) / 1000 if expires.isdigit() and int(expires) else None
        elif (expiration := kept.get("expiration", "")).isdigit():
            expires_at = now + int(expiration) / 1000
        return _Message(
            f"ID:memory-{next(self._numbers)}",
            destination,
            kept,
            body,
            kept.get("persistent") == "true",
            expires_at,
        )

    def _refuse_messages(self, queue: _Queue, messages: list[_Message]) -> None:
        """NACKed: back to the front of the queue (RabbitMQ), or dead-lettered (ActiveMQ)."""
        if self.flavour == "rabbitmq":
            for message in messages:
                message.redelivered = True
            queue.messages.extendleft(reversed(messages))
            return
        dead = self._queue(DEAD_LETTER_QUEUE)
        for message in messages:
            if message.persistent:
                headers = message.headers | {"original-destination": message.destination}
                letter = _Message(
                    message.id, f"/queue/{DEAD_LETTER_QUEUE}", headers, message.body, True, None
                )
                dead.messages.append(letter)
        self._dispatch(dead)

    def _dispatch(self, queue: _Queue) -> None:
        """Deliver what the queue holds to consumers with room, dropping expired messages."""
        if self._frozen or not queue.consumers:
            return
        now = self._clock()
        while queue.messages:
            message = queue.messages[0]
            if message.expires_at is not None and message.expires_at <= now:
                queue.messages.popleft()
                continue
            consumer = _next_consumer(queue)
            if consumer is None:
                return
            queue.messages.popleft()
            _deliver(consumer, message, next(self._numbers))


def _next_consumer(queue: _Queue) -> _Subscription | None:
    """The consumer the next message goes to: the active one of a one-at-a-time queue, else
    the next in turn with room; None when none has room."""
    consumers = queue.consumers
    exclusive = next((c for c in consumers if c.exclusive), None)
    if exclusive is not None or queue.single_active:
        active = exclusive or consumers[0]
        return active if active.has_room() else None
    for step in range(len(consumers)):
        candidate = consumers[(queue.turn + step) % len(consumers)]
        if candidate.has_room():
            queue.turn = (queue.turn + step + 1) % len(consumers)
            return candidate
    return None


def _deliver(subscription: _Subscription, message: _Message, number: int) -> None:
    headers = message.headers | {
        "destination": message.destination,
        "message-id": message.id,
        "subscription": subscription.id,
    }
    if message.redelivered:
        headers["redelivered"] = "true"
    if subscription.ack != "auto":
        ack_id = f"{message.id}:{number}"
        headers["ack"] = ack_id
        subscription.unacked[ack_id] = message
    subscription.connection.post("message", MemoryFrame("MESSAGE", headers, message.body))


def _take_acknowledged(subscription: _Subscription, ack_id: str) -> list[_Message]:
    """The messages an ACK or NACK of `ack_id` covers, taken off the unacknowledged: with
    `client` every one up to it, else it alone."""
    if subscription.ack != "client":
        return [subscription.unacked.pop(ack_id)]
    taken = []
    for key in list(subscription.unacked):
        taken.append(subscription.unacked.pop(key))
        if key == ack_id:
            break
    return taken


def _copy(message: _Message) -> _Message:
    return _Message(
        message.id,
        message.destination,
        dict(message.headers),
        message.body,
        message.persistent,
        message.expires_at,
    )


def _error_frame(refusal: _Refused) -> MemoryFrame:
    headers = {"message": refusal.message, "content-type": "text/plain"}
    return MemoryFrame("ERROR", headers, refusal.body.encode())
