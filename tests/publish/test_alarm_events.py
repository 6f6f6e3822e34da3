"""Alarm events on the broker: the document and headers of one event; the events of an alarm
book reaching a real broker (ActiveMQ and RabbitMQ) over the telemetry publisher's connection,
only while the instance publishes; and a `nettel serve` --ha-group of two replicas (in this
process, over the in-memory broker) publishing each event once on --alarm-topic."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import orjson
import pytest

from devtools.stomp_client import BrokerClient, StompClient
from devtools.waiting import wait_for
from service.alarms.book import AlarmBook
from service.alarms.records import AlarmKind
from service.broker.link import BrokerAccess
from service.publish.alarm_events import SUBCATEGORY, alarm_message
from service.publish.alarm_feed import build_alarm_feed
from service.publish.alarm_view import alarm_record
from service.publish.stream import StreamLimit
from service.publish.telemetry import TelemetryPublisher
from tests.publish.alarm_data import FIREWALL, HIGH_LOSS, OPENED, closed, opened
from tests.publish.test_alarm_stream import MATRIX

TOPIC = "/topic/alarms.perfsonar"
#: What a pS-Dash-style consumer of AAAS's documents reads.
PS_DASH_FIELDS = {"category", "subcategory", "event", "body", "tags", "source"}


def test_an_event_is_the_alarm_record_with_aaas_fields_action_and_time() -> None:
    event = closed(HIGH_LOSS, OPENED + 840.0)
    destination, headers, body = alarm_message(event, TOPIC, MATRIX)
    document = orjson.loads(body)
    assert destination == TOPIC
    assert document == alarm_record(event.alarm, MATRIX) | {
        "subcategory": "Sites",
        "action": "close",
        "at": OPENED + 840.0,
    }
    assert PS_DASH_FIELDS <= set(document)
    assert (document["category"], document["event"]) == ("Networking", "high packet loss")
    assert document["tags"] == ["SITE-A", "SITE-B"]
    assert document["source"] == {"loss": 0.08, "threshold": 0.02}
    assert headers == {
        "destination": TOPIC,
        "event-type": "nettel.alarm",
        "persistent": "true",
        "alarm_id": HIGH_LOSS.id,
        "alarm_kind": "high packet loss",
        "alarm_action": "close",
    }


def test_every_kind_has_an_aaas_subcategory() -> None:
    assert set(SUBCATEGORY) == set(AlarmKind)
    assert SUBCATEGORY[AlarmKind.FIREWALL_ISSUE] == "Perfsonar"


@pytest.fixture
def topic_listener(stomp_broker) -> Iterator[tuple[str, StompClient]]:
    topic = f"/topic/alarms.test-{uuid.uuid4().hex[:8]}"
    listener = StompClient(stomp_broker.brokers)
    listener.subscribe(topic, receipt=f"subscribed-{topic}")  # active before the first event
    yield topic, listener
    listener.close()


@pytest.mark.broker
def test_book_events_reach_the_alarm_topic_only_while_publishing(
    stomp_broker, topic_listener
) -> None:
    topic, listener = topic_listener
    publishing = [True]
    telemetry = TelemetryPublisher(
        BrokerAccess([("127.0.0.1", stomp_broker.stomp_port)], vhost="/"),
        "/topic/telemetry.unused",
        publishes=lambda: publishing[0],
    )
    book = AlarmBook()
    feed = build_alarm_feed(book, StreamLimit(), lambda: MATRIX, telemetry, topic)
    telemetry.start()
    feed.start()
    try:
        book.record([opened(HIGH_LOSS)])
        book.record([closed(HIGH_LOSS, OPENED + 840.0)])
        listener.wait_for_messages(2, what="the open and close events")
        first = listener.take()
        publishing[0] = False  # a standby replica of the group
        book.record([opened(FIREWALL)])
        publishing[0] = True
        book.record([closed(FIREWALL, OPENED + 900.0)])
        second = wait_for(listener.take, what="the event after the takeover")
    finally:
        feed.stop()
        telemetry.stop()
    assert [(m.json()["id"], m.json()["action"]) for m in first] == [
        (HIGH_LOSS.id, "open"),
        (HIGH_LOSS.id, "close"),
    ]
    assert first[0].json() == orjson.loads(alarm_message(opened(HIGH_LOSS), topic, MATRIX)[2])
    assert first[0].headers["alarm_kind"] == "high packet loss"
    assert [(m.json()["id"], m.json()["action"]) for m in second] == [(FIREWALL.id, "close")]
    assert listener.arrivals_within(0.5) == []


def test_a_group_of_replicas_publishes_each_alarm_event_once(memory_broker, memory_service):
    topic = "/topic/alarms.group-test"
    listener = BrokerClient(memory_broker.access())
    listener.subscribe(topic, receipt="subscribed")
    flags = ("--interval", "0.5", "--model", "none", "--alarm-topic", topic, "--ha-group", "g1")
    lease = ("--ha-lease-interval", "0.5", "--ha-lease-timeout", "1.5")
    replicas = [
        memory_service(memory_broker, *flags, *lease, "--client-id", f"replica-{n}") for n in (1, 2)
    ]
    leaders = wait_for(
        lambda: [r for r in replicas if r.runtime.publishes_telemetry()] or None,
        what="a leader elected",
    )
    assert len(leaders) == 1
    for replica in replicas:  # each replica's engine raises the same alarms
        assert replica.runtime.alarms is not None
        replica.runtime.alarms.record([opened(HIGH_LOSS)])
    [message] = listener.wait_for_messages(1, what="the open event")
    assert listener.arrivals_within(1.0) == []  # no second copy from the standby
    assert message.json()["id"] == HIGH_LOSS.id and message.json()["action"] == "open"
    assert message.headers["destination"] == topic
    listener.close()
