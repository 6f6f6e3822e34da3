"""The broker-connection contract: the same tests on the in-memory broker (as ActiveMQ and as
RabbitMQ) and on the real ActiveMQ and RabbitMQ, through nettel's `BrokerConnection`s.

What only the wire can show is why the real brokers are here: that the in-memory broker does what
they do with the frames nettel sends (its SUBSCRIBE headers per flavour come from
`stomp_source.subscription_target`, its lease queue from `election.lease_destination`), so that
the unit and behaviour tests that run on it say something about the real ones. Where the
flavours differ (a NACK, a refused SUBSCRIBE, how a client id is held), each in-memory flavour
must do what its real broker does.

Nothing here waits by the clock, except where a test proves that something does not arrive
(`arrivals_within`, said so at the call) and the few milliseconds an expiring message needs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from devtools.stomp_client import BrokerClient, Message
from devtools.waiting import wait_for
from service.broker.connection import BrokerError, ConnectionListener, Frame
from service.broker.election import lease_destination
from service.broker.flavour import resolve_flavour
from service.ingest.stomp_source import SubscriptionSpec, subscription_target
from tests.broker.brokers_under_test import BrokerUnderTest, broker_under_test, unique

#: Every implementation the contract runs on; the real ones need a broker (`broker` mark).
IMPLEMENTATIONS = [
    pytest.param("memory-activemq", id="memory-activemq"),
    pytest.param("memory-rabbitmq", id="memory-rabbitmq"),
    pytest.param("activemq", id="activemq", marks=pytest.mark.broker),
    pytest.param("rabbitmq", id="rabbitmq", marks=[pytest.mark.broker, pytest.mark.rabbitmq]),
]


@pytest.fixture(params=IMPLEMENTATIONS)
def broker(request: pytest.FixtureRequest) -> Iterator[BrokerUnderTest]:
    """Each implementation in turn; the real brokers are the session's."""
    under_test = broker_under_test(request.param, request.getfixturevalue)
    yield under_test
    under_test.close_clients()


@pytest.fixture(params=IMPLEMENTATIONS)
def own_broker(request: pytest.FixtureRequest) -> Iterator[BrokerUnderTest]:
    """Each implementation in turn, a broker of the test's own: to stop and start."""
    under_test = broker_under_test(
        request.param, lambda flavour: request.getfixturevalue(f"{flavour}_factory")()
    )
    yield under_test
    under_test.close_clients()


def bodies(messages: list[Message]) -> list[bytes]:
    return [message.body for message in messages]


def client_ack(broker: BrokerUnderTest, destination: str, **spec: object) -> tuple[str, dict]:
    """The ack mode and SUBSCRIBE headers nettel uses with ack=client on this flavour."""
    target = subscription_target(
        SubscriptionSpec(mode="plain", ack="client", **spec),  # type: ignore[arg-type]
        destination,
        0,
        broker.flavour,
    )
    return target.ack, target.headers


def test_connect_names_the_flavour_and_disconnect_ends_the_connection(broker):
    client = broker.client()
    assert resolve_flavour("auto", client.connection.server) == (broker.flavour, False)
    assert client.connection.is_connected()
    client.close()
    assert client.ended.wait(10)
    assert not client.connection.is_connected()


def test_a_subscription_answers_its_receipt_and_delivers_headers_and_body_as_sent(broker):
    queue = "/queue/" + unique("contract.subscribe")
    consumer, producer = broker.client(), broker.client()
    consumer.subscribe(queue, id="7", receipt="subscribed")  # returns once the RECEIPT came
    body = '{"tool": "n\u00e9ttel"}\n'.encode() + b"\x00\x01"
    producer.send_confirmed(queue, body, "sent", headers={"x-nettel": "a b", "persistent": "true"})
    [message] = consumer.wait_for_messages(1)
    assert message.body == body
    headers = message.headers
    assert headers["destination"] == queue and headers["subscription"] == "7"
    assert headers["message-id"] and headers["x-nettel"] == "a b"
    assert headers.get("redelivered", "false") == "false"


def test_a_topic_gives_each_subscriber_what_is_sent_while_it_is_there(broker):
    topic = "/topic/" + unique("contract.fanout")
    first, second, producer = broker.client(), broker.client(), broker.client()
    producer.send_confirmed(topic, b"before", "before")  # nobody subscribed: gone
    first.subscribe(topic, receipt="first")
    second.subscribe(topic, receipt="second")
    producer.send(topic, b"one")
    producer.send(topic, b"two")
    for subscriber in (first, second):
        assert bodies(subscriber.wait_for_messages(2)) == [b"one", b"two"]


def durable_subscriber(broker: BrokerUnderTest, topic: str, client_id: str) -> BrokerClient:
    """A client subscribed durably to `topic` with nettel's headers for the flavour."""
    spec = SubscriptionSpec(mode="durable", client_id=client_id, ack="client")
    target = subscription_target(spec, topic, 0, broker.flavour)

    def subscribed() -> BrokerClient | None:
        try:  # the broker may still hold the client id of the connection just closed
            client = broker.client({"client-id": client_id})
        except BrokerError:
            return None
        client.subscribe(target.destination, target.ack, target.headers, "durable", id="0")
        return client

    return wait_for(subscribed, 10, what="a durable subscription")


def test_a_durable_subscription_keeps_what_is_sent_while_its_subscriber_is_away(broker):
    topic, client_id = "/topic/" + unique("contract.durable"), unique("contract")
    durable_subscriber(broker, topic, client_id).close()
    producer = broker.client()
    for number in range(3):
        producer.send_confirmed(
            topic, f"away {number}".encode(), f"p{number}", {"persistent": "true"}
        )
    back = durable_subscriber(broker, topic, client_id)
    received = back.wait_for_messages(3)
    assert sorted(bodies(received)) == [b"away 0", b"away 1", b"away 2"]
    back.ack(received)


def fill(producer: BrokerClient, queue: str, count: int) -> list[bytes]:
    sent = [f"m{number}".encode() for number in range(count)]
    for number, body in enumerate(sent):
        producer.send_confirmed(queue, body, f"m{number}", {"persistent": "true"})
    return sent


def test_unacknowledged_messages_come_again_marked_redelivered_acknowledged_ones_do_not(broker):
    queue = "/queue/" + unique("contract.redelivery")
    sent = fill(broker.client(), queue, 3)
    ack, headers = client_ack(broker, queue)
    first = broker.client()
    first.subscribe(queue, ack, headers, "first")
    received = first.wait_for_messages(3)
    assert bodies(received) == sent
    first.ack(received[:1])
    first.close()
    second = broker.client()
    second.subscribe(queue, ack, headers, "second")
    again = second.wait_for_messages(2)
    assert bodies(again) == sent[1:]
    assert all(message.headers["redelivered"] == "true" for message in again)


def test_a_client_ack_covers_the_messages_before_it(broker):
    queue = "/queue/" + unique("contract.cumulative")
    sent = fill(broker.client(), queue, 3)
    first = broker.client()
    first.subscribe(queue, "client", receipt="first")
    received = first.wait_for_messages(3)
    first.ack(received[1:2])  # covers m0 too
    first.close()
    second = broker.client()
    second.subscribe(queue, "client", receipt="second")
    assert bodies(second.wait_for_messages(1)) == sent[2:]


def test_prefetch_bounds_the_unacknowledged_messages(broker):
    queue = "/queue/" + unique("contract.prefetch")
    sent = fill(broker.client(), queue, 6)
    ack, headers = client_ack(broker, queue, prefetch=3)
    consumer = broker.client()
    consumer.subscribe(queue, ack, headers, "subscribed")
    received = consumer.wait_for_messages(3)
    assert consumer.arrivals_within(0.5) == []  # proves no fourth comes while three are unacked
    consumer.ack(received[:2])
    assert bodies(consumer.wait_for_messages(5)) == sent[:5]


def test_a_nack_requeues_on_rabbitmq_and_dead_letters_on_activemq(broker):
    queue = "/queue/" + unique("contract.nack")
    body = unique("nacked").encode()
    producer, consumer = broker.client(), broker.client()
    producer.send_confirmed(queue, body, "sent", {"persistent": "true"})
    consumer.subscribe(queue, "client-individual", receipt="subscribed")
    [message] = consumer.wait_for_messages(1)
    consumer.nack(message)
    if broker.flavour == "rabbitmq":
        _, again = consumer.wait_for_messages(2)
        assert again.body == body and again.headers["redelivered"] == "true"
        return
    dead = broker.client()
    dead.subscribe("/queue/ActiveMQ.DLQ", receipt="dead letters")
    letter = next(m for m in dead.wait_for_body(body) if m.body == body)
    assert letter.headers["original-destination"] == queue
    producer.send_confirmed(queue, b"after", "after")
    assert bodies(consumer.wait_for_body(b"after")) == [body, b"after"]  # not delivered again


def test_auto_acknowledged_messages_are_not_delivered_again(broker):
    queue = "/queue/" + unique("contract.auto")
    producer, first = broker.client(), broker.client()
    producer.send_confirmed(queue, b"once", "once", {"persistent": "true"})
    first.subscribe(queue, receipt="first")
    assert bodies(first.wait_for_messages(1)) == [b"once"]
    first.close()
    second = broker.client()
    second.subscribe(queue, receipt="second")
    producer.send_confirmed(queue, b"after", "after")
    assert bodies(second.wait_for_body(b"after")) == [b"after"]


def test_a_queue_keeps_messages_until_consumed_and_gives_each_to_one_consumer(broker):
    queue = "/queue/" + unique("contract.queue")
    producer = broker.client()
    sent = fill(producer, queue, 10)
    first, second = broker.client(), broker.client()
    first.subscribe(queue, receipt="first")
    second.subscribe(queue, receipt="second")
    sent += [f"n{number}".encode() for number in range(10)]
    for body in sent[10:]:
        producer.send(queue, body)

    def all_received() -> list[bytes] | None:
        got = bodies(first.messages) + bodies(second.messages)
        return got if len(got) >= len(sent) else None

    got = wait_for(all_received, 20, what="every message")
    assert sorted(got) == sorted(sent)  # each once, to one of the consumers


def test_one_consumer_at_a_time_gets_a_lease_queue_and_the_next_takes_over(broker):
    group = unique("contract")
    destination = lease_destination(group, broker.flavour)
    if broker.flavour == "rabbitmq":
        broker.declare_queue(f"nettel.ha.{group}", {"x-single-active-consumer": True})
        headers = {"prefetch-count": "1"}
    else:
        headers = {"activemq.exclusive": "true", "activemq.prefetchSize": "1"}

    def joined(id: str) -> BrokerClient | None:
        client = broker.client()
        client.connection.subscribe(destination, id, "auto", headers | {"receipt": id})
        try:  # RabbitMQ: the declared queue may take a moment to appear
            client.wait_for_receipt(id, 10)
            if not client.errors:
                return client
        except TimeoutError:
            pass
        # Gone before the next try: a subscription whose receipt came late would otherwise be
        # a consumer nobody watches, taking the messages meant for the one after it
        client.close()
        return None

    active = wait_for(lambda: joined("active"), 20, what="the first consumer")
    waiting = wait_for(lambda: joined("waiting"), 20, what="the second consumer")
    producer = broker.client()
    for number in range(4):
        producer.send(destination, f"t{number}".encode())
    assert bodies(active.wait_for_messages(4)) == [b"t0", b"t1", b"t2", b"t3"]  # all: none left
    active.connection.disconnect()  # waits for the broker's receipt: then it has left
    producer.send_confirmed(destination, b"u0", "u0")
    producer.send(destination, b"u1")
    # RabbitMQ confirms a DISCONNECT before its consumer is cancelled: the first message after it
    # may still go to the leaving auto-ack consumer and be lost with it (as a lease token may
    # be; the next is sent within the interval). What follows reaches the next consumer.
    assert bodies(waiting.wait_for_body(b"u1")) in ([b"u0", b"u1"], [b"u1"])


def test_an_expired_message_is_not_delivered(broker):
    queue = "/queue/" + unique("contract.expiry")
    producer = broker.client()

    def expiring(milliseconds: int) -> dict[str, str]:
        if broker.flavour == "rabbitmq":
            return {"expiration": str(milliseconds)}
        return {"expires": str(int(time.time() * 1000) + milliseconds)}

    producer.send_confirmed(queue, b"short", "short", expiring(20))
    producer.send_confirmed(queue, b"long", "long", expiring(60_000))
    time.sleep(0.1)  # the short one's 20 ms pass
    consumer = broker.client()
    consumer.subscribe(queue, receipt="subscribed")
    assert bodies(consumer.wait_for_body(b"long")) == [b"long"]


def test_a_refused_subscription_is_an_error_frame_with_the_brokers_reason(broker):
    client = broker.client({"client-id": unique("contract")})
    if broker.flavour == "activemq":  # a durable subscription to a queue
        destination = "/queue/" + unique("contract.refused")
        headers = {"activemq.subscriptionName": "refused"}
    else:  # a queue nobody declared
        destination, headers = "/amq/queue/" + unique("contract.missing"), {}
    client.connection.subscribe(destination, "0", "auto", headers | {"receipt": "refused"})
    error = client.wait_for_error()
    if broker.flavour == "activemq":  # the connection stays usable
        assert "cannot durably subscribe to a Queue" in error.headers["message"]
        client.send_confirmed("/queue/" + unique("contract.after"), b"x", "still usable")
    else:  # RabbitMQ closes the connection after an ERROR
        assert error.headers["message"] == "not_found" and b"NOT_FOUND" in error.body
        assert client.ended.wait(10)


def test_a_client_id_is_held_by_one_connection_at_a_time(broker):
    client_id = unique("contract.holder")
    if broker.flavour == "activemq":
        holder = broker.client({"client-id": client_id})
        with pytest.raises(BrokerError, match="already connected"):
            broker.client({"client-id": client_id})
    else:  # nettel's lock: the exclusive queue nettel.client.<client-id> (stomp_source)
        lock = f"/queue/nettel.client.{client_id}"
        headers = {"exclusive": "true", "durable": "false", "auto-delete": "true"}
        holder = broker.client()
        holder.subscribe(lock, headers=headers, receipt="held")
        other = broker.client()
        other.connection.subscribe(lock, "lock", "auto", headers | {"receipt": "refused"})
        assert other.wait_for_error().headers["message"] == "resource_locked"
        assert other.ended.wait(10)
    holder.close()
    assert holder.ended.wait(10)


def test_a_broker_going_away_ends_connections_and_its_persistent_queued_messages_stay(
    own_broker,
):
    queue = "/queue/" + unique("contract.restart")
    producer = own_broker.client()
    producer.send_confirmed(queue, b"kept", "kept", {"persistent": "true"})
    producer.send_confirmed(queue, b"lost", "lost")  # not persistent
    own_broker.stop()
    assert producer.ended.wait(10) and not producer.connection.is_connected()
    with pytest.raises((BrokerError, OSError)):
        own_broker.client()
    own_broker.start()
    consumer = own_broker.client()
    consumer.subscribe(queue, receipt="subscribed")
    own_broker.client().send_confirmed(queue, b"after", "after")
    assert sorted(bodies(consumer.wait_for_body(b"after"))) == [b"after", b"kept"]


def test_a_broker_gone_silent_ends_the_connection_by_heartbeat_timeout(broker):
    """On the session's broker: frozen a few seconds, then thawed whatever happens (this test
    worker's other tests run before or after, never meanwhile)."""
    client = broker.client(heartbeat_ms=1000, heartbeat_tolerance=1.5)
    broker.freeze()
    try:
        assert client.heartbeat_timeout.wait(15)
        assert client.ended.wait(5) and not client.connection.is_connected()
    finally:
        broker.thaw()
    broker.client().close()  # and the broker takes connections again


def test_dropping_a_connection_ends_it_and_returns_its_unacknowledged_messages(broker):
    queue = "/queue/" + unique("contract.drop")
    broker.client().send_confirmed(queue, b"held", "held", {"persistent": "true"})
    first = broker.client()
    first.subscribe(queue, "client-individual", receipt="first")
    first.wait_for_messages(1)
    first.connection.drop("test")
    assert first.ended.wait(10) and not first.connection.is_connected()
    second = broker.client()
    second.subscribe(queue, "client-individual", receipt="second")
    [again] = second.wait_for_messages(1)
    assert again.body == b"held" and again.headers["redelivered"] == "true"


class _Stall(ConnectionListener):
    """Holds the receiving thread at the first message until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def on_message(self, frame: Frame) -> None:
        self.release.wait(30)


def test_unread_bytes_count_what_waits_behind_a_stalled_listener(broker):
    queue = "/queue/" + unique("contract.unread")
    consumer = broker.client()
    stall = _Stall()
    consumer.connection.add_listener("stall", stall)
    consumer.subscribe(queue, receipt="subscribed")
    producer = broker.client()
    body = b"x" * 4096
    try:
        for _ in range(200):  # 800 KB
            producer.send(queue, body)
        wait_for(lambda: consumer.connection.unread_bytes() > 64 * 1024, 20, what="unread bytes")
    finally:
        stall.release.set()
    consumer.wait_for_messages(200)
    wait_for(lambda: consumer.connection.unread_bytes() == 0, 10, what="all read")
