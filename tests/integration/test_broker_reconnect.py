"""The shared connection lifecycle (`broker.link.BrokerLink`) over the in-memory broker: the
consumer and the telemetry publisher both come back after the broker restarts (as ActiveMQ and
as RabbitMQ), a broker gone silent is noticed by missed heart-beats and the link comes back,
reconnecting backs off, and stop() returns at once while the broker is away. (That the real
brokers end connections so and time out so is the connection contract's.)"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from devtools.stomp_client import BrokerClient
from devtools.waiting import wait_for
from service.broker.link import BrokerLink
from service.broker.memory_broker import MemoryBroker
from service.ingest.stomp_source import StompSource, SubscriptionSpec
from service.publish.telemetry import TelemetryPublisher
from tests.frame_recorder import FrameRecorder
from tests.publish.support import host_link, make_matrix

#: Queues, not topics: what is sent before the (re)subscription waits for it instead of vanishing.
INGEST = "/queue/nettel.test.reconnect.ingest"
TELEMETRY = "/queue/nettel.test.reconnect.telemetry"
HEARTBEAT_MS = 1000


def telemetry_collector(broker: MemoryBroker) -> BrokerClient:
    client = BrokerClient(broker.access())
    client.subscribe(TELEMETRY, receipt="collecting")
    return client


def costs(collector: BrokerClient) -> list[str]:
    """The cost of each telemetry message received."""
    return [m.json()["summaries"][0]["summary_data"][0][1]["cost"] for m in collector.messages]


def matrix(cost: float):
    return make_matrix([host_link("192.0.2.1", "192.0.2.2", cost=cost)])


def logged(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.getMessage() == text]


def messages(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return len(logged(caplog, text))


def test_consumer_and_publisher_reconnect_after_the_broker_restarts(
    flavoured_memory_broker, caplog
):
    caplog.set_level(logging.INFO)
    broker = flavoured_memory_broker
    access = broker.access(heartbeat_ms=HEARTBEAT_MS)
    recorder = FrameRecorder()
    source = StompSource(
        access,
        [INGEST],
        recorder,
        subscription=SubscriptionSpec(mode="plain"),
        max_backoff_seconds=2.0,
    )
    publisher = TelemetryPublisher(access, TELEMETRY, max_backoff_seconds=2.0)
    source.connect()
    publisher.start()
    collector = telemetry_collector(broker)
    try:
        wait_for(lambda: source.connected, 20, what="the consumer connected")
        with BrokerClient(broker.access()) as producer:
            producer.send(INGEST, b"before")
        publisher.observe(None, matrix(0.1))
        wait_for(lambda: recorder.bodies == [b"before"], 20, what="a message before the restart")
        wait_for(lambda: costs(collector) == ["0.1"], 20, what="telemetry before the restart")

        broker.stop()
        wait_for(lambda: not source.connected, 10, interval=0.1, what="the consumer to notice")
        wait_for(
            lambda: messages(caplog, "telemetry publisher connection lost"),
            10,
            what="the publisher to notice",
        )
        publisher.observe(matrix(0.1), matrix(0.2))  # kept until the broker is back
        wait_for(
            lambda: (
                messages(caplog, "broker connect failed")
                and messages(caplog, "telemetry publisher connect failed")
            ),
            10,
            what="both failing to connect while the broker is away",
        )
        down_before = source.disconnected_seconds()

        broker.start()
        wait_for(lambda: source.connected, 10, interval=0.1, what="the consumer reconnected")
        assert source.disconnected_seconds() > down_before  # the time away, counted on
        with BrokerClient(broker.access()) as producer:
            producer.send(INGEST, b"after")  # arrives only if the consumer subscribed again
        wait_for(lambda: recorder.bodies == [b"before", b"after"], 20, what="a message after it")
        collector = telemetry_collector(broker)
        wait_for(lambda: costs(collector) == ["0.2"], 20, what="the batch kept while away")
        assert messages(caplog, "broker connected") == 2
        assert messages(caplog, "telemetry publisher connected") == 2
    finally:
        collector.close()
        publisher.stop()
        source.disconnect()


def test_a_silent_broker_is_noticed_by_missed_heartbeats_and_the_link_comes_back(memory_broker):
    connects = []
    link = BrokerLink(
        memory_broker.access(heartbeat_ms=HEARTBEAT_MS),
        on_connect=connects.append,
        max_backoff_seconds=1.0,
    )
    link.start()
    try:
        first = wait_for(lambda: link.wait_connected(0.1), 20, what="connected")
        assert connects == [first]
        memory_broker.freeze()  # the connection stays open, silent
        try:
            wait_for(lambda: not link.connected, 10, interval=0.1, what="a heart-beat timeout")
            assert link.connection is None
        finally:
            memory_broker.thaw()
        second = wait_for(lambda: link.wait_connected(0.1), 20, what="connected again")
        assert second is not first and connects[-1] is second
        assert second.is_connected() and not first.is_connected()
        link.stop()
        assert not link.connected and not second.is_connected()
        assert memory_broker.connections == 0
    finally:
        link.stop()


def link_threads() -> int:
    return sum(thread.name.endswith("-link") for thread in threading.enumerate())


def test_reconnecting_backs_off_and_stop_returns_promptly_while_the_broker_is_away(
    memory_broker, caplog
):
    caplog.set_level(logging.INFO)
    access = memory_broker.access()
    source = StompSource(
        access,
        [INGEST],
        FrameRecorder(),
        subscription=SubscriptionSpec(mode="plain"),
        max_backoff_seconds=30.0,
    )
    publisher = TelemetryPublisher(access, TELEMETRY, max_backoff_seconds=30.0)
    threads_before = link_threads()
    source.connect()
    publisher.start()
    try:
        wait_for(lambda: source.connected, 20, what="connected")
        wait_for(lambda: messages(caplog, "telemetry publisher connected"), 20, what="publisher")
        memory_broker.stop()
        wait_for(lambda: not source.connected, 10, interval=0.1, what="the loss noticed")
        publisher.observe(None, matrix(0.3))  # a batch waiting for the broker
        failures = wait_for(
            lambda: (found := logged(caplog, "broker connect failed"))[2:] and found,
            10,
            what="three failed attempts",
        )
        # backing off, not hammering: 0.5-1 s, then 1-2 s between the first three attempts
        assert failures[2].created - failures[0].created >= 1.5
        for stop in (source.disconnect, publisher.stop):
            began = time.monotonic()
            stop()  # the next attempt is seconds away: stop must not wait for it
            assert time.monotonic() - began < 1.5, f"{stop.__qualname__} took long"
        assert not source.connected
        assert link_threads() == threads_before
    finally:
        source.disconnect()
        publisher.stop()
