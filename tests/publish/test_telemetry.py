"""Telemetry in netTel's layout: message builder, change detection, queue, and the service
publishing over the in-memory broker (as ActiveMQ and as RabbitMQ; that the real brokers take
the frames so is the connection contract's)."""

from __future__ import annotations

import json
import logging
import time
import uuid

import pytest

from devtools.stomp_client import BrokerClient, Message
from devtools.waiting import wait_for
from service.analysis.predictor import ModelInfo
from service.broker.link import BrokerAccess
from service.broker.memory_broker import MemoryBroker
from service.publish.telemetry import TelemetryPublisher, build_telemetry_message, changed_links
from tests.integration.wire import current_minute_ts, get_json, load_sample
from tests.publish.support import TS, host_link, make_matrix
from tests.publish.wire_data import DELAY, DESTINATION, LOSS, SOURCE, delay_body, loss_body

SAMPLE = load_sample("telemetry-output-nettel.json")
TOPIC = "/topic/telemetry.perfsonar"
MODEL = ModelInfo(name="nettel-mlp", version="3", sha256="ab" * 32, created="2024-05-01")
LINK = host_link(
    "192.0.2.10",
    "198.51.100.20",
    source_host="ps-latency.site-a.example.org",
    destination_host="ps-latency.site-b.example.net",
    cost=0.6,
    utilisation=0.83,
    empirical=0.19,
    congested=True,
)
#: The input meta keeps more than a link record holds; these are what nettel cannot repeat.
NOT_KEPT = {"measurement_agent"}


def test_message_has_the_sample_layout_plus_nettel_extras():
    headers, body = build_telemetry_message(LINK, TOPIC, "3")
    assert headers == SAMPLE["headers"] | {"timestamp": str(TS), "gmt-timestamp": str(TS)}
    document = json.loads(body)
    assert set(document) == set(SAMPLE["body"])
    sample_meta = SAMPLE["body"]["meta"]
    assert document["meta"] == {k: v for k, v in sample_meta.items() if k not in NOT_KEPT}
    (summary,) = document["summaries"]
    (sample_summary,) = SAMPLE["body"]["summaries"]
    assert {k: v for k, v in summary.items() if k != "summary_data"} == {
        k: v for k, v in sample_summary.items() if k != "summary_data"
    }
    assert summary["summary_data"] == [
        [TS, {"ml": "0.83", "empirical": "0.19", "cost": "0.6", "congested": True,
              "model_version": "3"}]
    ]  # fmt: skip


def test_unknown_values_are_null():
    _, body = build_telemetry_message(LINK | {"utilisation": None}, TOPIC, None)
    values = json.loads(body)["summaries"][0]["summary_data"][0][1]
    assert values["ml"] is None and values["model_version"] is None


def test_changed_links_are_those_with_data_whose_watched_fields_moved():
    quiet = host_link("192.0.2.1", "192.0.2.2")
    no_data = host_link("192.0.2.3", "192.0.2.4", last=None)
    first = make_matrix([LINK, quiet, no_data])
    assert changed_links(None, first) == [LINK, quiet]
    assert changed_links(first, make_matrix([LINK, quiet, no_data])) == []
    for field, value in [("cost", 0.61), ("utilisation", 0.5), ("empirical", 0.0)]:
        assert changed_links(first, make_matrix([LINK | {field: value}, quiet])) == [
            LINK | {field: value}
        ]
    flipped = quiet | {"congested": True}
    assert changed_links(first, make_matrix([LINK, flipped])) == [flipped]
    delay_only = quiet | {"delay_ms": {**quiet["delay_ms"], "mean": 99.0}}
    assert changed_links(first, make_matrix([LINK, delay_only])) == []


def test_links_moved_up_by_retirement_are_compared_with_their_own_last_record():
    retired = host_link("192.0.2.1", "192.0.2.2")
    kept = host_link("192.0.2.3", "192.0.2.4", cost=0.3)
    moved = host_link("192.0.2.5", "192.0.2.6", cost=0.3)
    first = make_matrix([retired, kept, moved])
    assert changed_links(first, make_matrix([kept, moved])) == []  # rows shifted, nothing new
    assert changed_links(first, make_matrix([moved, kept])) == []
    assert changed_links(first, make_matrix([kept, moved | {"cost": 0.4}])) == [
        moved | {"cost": 0.4}
    ]
    newcomer = host_link("192.0.2.7", "192.0.2.8", cost=0.3)
    assert changed_links(first, make_matrix([kept, newcomer])) == [newcomer]


def test_a_slow_broker_drops_the_oldest_batch_with_a_log_line(caplog):
    publisher = TelemetryPublisher(
        BrokerAccess([("127.0.0.1", 9)]), TOPIC, max_batches=2
    )  # never started
    matrices = [make_matrix([LINK | {"cost": cost}]) for cost in (0.1, 0.2, 0.3)]
    with caplog.at_level(logging.WARNING, logger="nettel.telemetry"):
        publisher.observe(None, matrices[0])
        publisher.observe(matrices[0], matrices[1])
        assert not caplog.records
        publisher.observe(matrices[1], matrices[2])
    assert [r.getMessage() for r in caplog.records] == [
        "telemetry publisher behind the broker; dropped the oldest batch"
    ]


def test_links_are_published_at_most_once_per_interval_with_the_changes_in_between():
    now = [100.0]
    publisher = TelemetryPublisher(
        BrokerAccess([("127.0.0.1", 9)]), TOPIC, min_interval=10.0, clock=lambda: now[0]
    )
    quiet = host_link("192.0.2.1", "192.0.2.2")
    first, second, third = (make_matrix([LINK | {"cost": c}, quiet]) for c in (0.1, 0.2, 0.3))
    publisher.observe(None, first)
    assert publisher._queue.peek(0).links == list(first.links)
    publisher._queue.done(publisher._queue.peek(0))
    now[0] += 5.0
    publisher.observe(first, second)  # within the interval: held back
    assert publisher._queue.peek(0) is None
    now[0] += 5.0
    publisher.observe(second, third)  # diffed against what was published, not against `second`
    assert publisher._queue.peek(0).links == [LINK | {"cost": 0.3}]


def subscribed(broker: MemoryBroker, destination: str) -> BrokerClient:
    """A client collecting every message on `destination`."""
    client = BrokerClient(broker.access())
    client.subscribe(destination, receipt="subscribed")
    return client


@pytest.fixture
def bus(flavoured_memory_broker):
    """Both flavours: the publisher and the service's telemetry connection on each."""
    return flavoured_memory_broker


@pytest.fixture
def subscriber(bus):
    topic = f"/topic/telemetry.test-{uuid.uuid4().hex[:8]}"
    listener = subscribed(bus, topic)
    yield topic, listener
    listener.close()


def links_of(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.json()["meta"]["source"], m.json()["meta"]["destination"]) for m in messages]


def test_changed_links_reach_the_broker_in_nettel_layout_and_only_once(
    serve, publisher, subscriber
):
    topic, listener = subscriber
    serve("--telemetry-topic", topic)
    now = current_minute_ts()
    other = {"source": "203.0.113.5", "input_source": "ps-lat.site-c.example.com"}
    publisher.send(DELAY, delay_body([now - 120, now - 60]))
    publisher.send(LOSS, loss_body({now - 120: 0.0, now - 60: 0.0}))
    publisher.send(DELAY, delay_body([now - 120, now - 60], **other))
    wait_for(lambda: len(listener.messages) >= 2, what="a message per link")
    time.sleep(1.5)  # let both messages' data settle into the matrix
    first = listener.take()
    assert set(links_of(first)) == {(SOURCE, DESTINATION), ("203.0.113.5", DESTINATION)}

    message = next(m for m in reversed(first) if m.json()["meta"]["source"] == SOURCE)
    headers, body = message.headers, message.json()
    assert {k: headers[k] for k in SAMPLE["headers"]} == {
        "destination": topic,
        "event-type": "telemetry.perfsonar",
        "summaries": "1",
        "input-source": "ps-latency.site-a.example.org",
        "input-destination": "ps-latency.site-b.example.net",
        "timestamp": str(now - 60),
        "gmt-timestamp": str(now - 60),
    }
    assert body["meta"]["tool_name"] == "netTel"
    (summary,) = body["summaries"]
    assert summary["event_type"] == "telemetry.perfsonar" and summary["summary_window"] == "60"
    ((ts, values),) = summary["summary_data"]
    assert ts == now - 60 and set(values) == {
        "ml",
        "empirical",
        "cost",
        "congested",
        "model_version",
    }
    assert values["ml"] is None and values["model_version"] is None  # served with --model none
    assert float(values["empirical"]) == 0.0 and 0.0 <= float(values["cost"]) <= 1.0

    assert listener.arrivals_within(3.5) == []  # about three recomputes without new data

    publisher.send(LOSS, loss_body({now - 60: 0.0, now: 0.5}))
    publisher.send(DELAY, delay_body([now]))
    again = wait_for(listener.take, what="the changed link again")
    time.sleep(1.5)
    again += listener.take()
    assert set(links_of(again)) == {(SOURCE, DESTINATION)}


def test_nothing_is_published_when_telemetry_is_off(serve, publisher, subscriber):
    topic, listener = subscriber
    service = serve("--telemetry-topic", topic, "--publish-telemetry", "false")
    now = current_minute_ts()
    publisher.send(DELAY, delay_body([now - 60]))
    wait_for(lambda: (get_json(f"{service.url}/costmatrix") or {}).get("links"), what="a link")
    assert listener.arrivals_within(2.5) == []  # proves that nothing is sent: two recomputes
