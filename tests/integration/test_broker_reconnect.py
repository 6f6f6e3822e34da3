"""The shared connection lifecycle (`broker.link.BrokerLink`) on a real private ActiveMQ: the
consumer and the telemetry publisher both come back after the broker restarts (on RabbitMQ
too), a frozen broker is noticed by missed heart-beats, and stop() returns at once while the
broker is away."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import pytest

from devtools.stomp_client import DEFAULT_VHOST, StompClient
from devtools.waiting import wait_for
from service.broker.link import BrokerAccess, BrokerLink
from service.ingest.stomp_source import StompSource, SubscriptionSpec
from service.publish.telemetry import TelemetryPublisher
from tests.frame_recorder import FrameRecorder
from tests.publish.support import host_link, make_matrix

pytestmark = [pytest.mark.broker, pytest.mark.slow]
#: Queues, not topics: what is sent before the (re)subscription waits for it instead of vanishing.
INGEST = "/queue/nettel.test.reconnect.ingest"
TELEMETRY = "/queue/nettel.test.reconnect.telemetry"
HEARTBEAT_MS = 1000


def telemetry_collector(brokers: str) -> StompClient:
    client = StompClient(brokers)
    client.subscribe(TELEMETRY)
    return client


def costs(collector: StompClient) -> list[str]:
    """The cost of each telemetry message received."""
    return [m.json()["summaries"][0]["summary_data"][0][1]["cost"] for m in collector.messages]


def matrix(cost: float):
    return make_matrix([host_link("192.0.2.1", "192.0.2.2", cost=cost)])


def messages(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(record.getMessage() == text for record in caplog.records)


def test_consumer_and_publisher_reconnect_after_the_broker_restarts(broker_factory, caplog):
    caplog.set_level(logging.INFO)
    broker = broker_factory()
    address = [("127.0.0.1", broker.stomp_port)]
    received: list[bytes] = []
    access = BrokerAccess(address, heartbeat_ms=HEARTBEAT_MS, vhost=DEFAULT_VHOST)
    source = StompSource(
        access,
        [INGEST],
        FrameRecorder(lambda frame: received.append(frame[1])),
        subscription=SubscriptionSpec(mode="plain"),
        max_backoff_seconds=2.0,
    )
    publisher = TelemetryPublisher(access, TELEMETRY, max_backoff_seconds=2.0)
    source.connect()
    publisher.start()
    collector = telemetry_collector(broker.brokers)
    try:
        wait_for(lambda: source.connected, 20, what="the consumer connected")
        producer = StompClient(broker.brokers)
        producer.send(INGEST, b"before")
        producer.close()
        publisher.observe(None, matrix(0.1))
        wait_for(lambda: received == [b"before"], 20, what="a message before the restart")
        wait_for(lambda: costs(collector) == ["0.1"], 20, what="telemetry before the restart")

        broker.kill()
        wait_for(lambda: not source.connected, 10, interval=0.1, what="the consumer to notice")
        wait_for(
            lambda: messages(caplog, "telemetry publisher connection lost"),
            10,
            what="the publisher to notice",
        )
        down_before = source.disconnected_seconds()
        publisher.observe(matrix(0.1), matrix(0.2))  # kept until the broker is back
        time.sleep(2)
        assert messages(caplog, "broker connect failed") >= 1
        assert messages(caplog, "telemetry publisher connect failed") >= 1

        broker.start()
        wait_for(lambda: source.connected, 10, interval=0.1, what="the consumer reconnected")
        assert source.disconnected_seconds() >= down_before + 2
        producer = StompClient(broker.brokers)
        producer.send(INGEST, b"after")  # arrives only if the consumer subscribed again
        producer.close()
        wait_for(lambda: received == [b"before", b"after"], 20, what="a message after it")
        collector = telemetry_collector(broker.brokers)
        wait_for(lambda: costs(collector) == ["0.2"], 20, what="the batch kept while away")
        assert messages(caplog, "broker connected") == 2
        assert messages(caplog, "telemetry publisher connected") == 2
    finally:
        collector.close()
        publisher.stop()
        source.disconnect()


def test_a_frozen_broker_is_noticed_by_missed_heartbeats_and_the_link_comes_back(
    activemq_factory,
):
    broker = activemq_factory()
    connects = []
    link = BrokerLink(
        BrokerAccess([("127.0.0.1", broker.stomp_port)], heartbeat_ms=HEARTBEAT_MS),
        on_connect=connects.append,
        max_backoff_seconds=1.0,
    )
    link.start()
    frozen = False
    try:
        first = wait_for(lambda: link.wait_connected(0.1), 20, what="connected")
        assert connects == [first]
        os.killpg(broker.pid, signal.SIGSTOP)  # the TCP connection stays open, silent
        frozen = True
        wait_for(lambda: not link.connected, 10, interval=0.1, what="a heart-beat timeout")
        assert link.connection is None
        os.killpg(broker.pid, signal.SIGCONT)
        frozen = False
        second = wait_for(lambda: link.wait_connected(0.1), 20, what="connected again")
        assert second is not first and connects[-1] is second
        assert second.is_connected() and not first.is_connected()
        link.stop()
        assert not link.connected
        wait_for(lambda: not second.is_connected(), 5, interval=0.1, what="a clean disconnect")
    finally:
        if frozen:
            os.killpg(broker.pid, signal.SIGCONT)
        link.stop()


def link_threads() -> int:
    return sum(thread.name.endswith("-link") for thread in threading.enumerate())


def test_stop_returns_promptly_while_the_broker_is_away(activemq_factory, caplog):
    caplog.set_level(logging.INFO)
    broker = activemq_factory()
    address = [("127.0.0.1", broker.stomp_port)]
    source = StompSource(
        BrokerAccess(address),
        [INGEST],
        FrameRecorder(),
        subscription=SubscriptionSpec(mode="plain"),
        max_backoff_seconds=30.0,
    )
    publisher = TelemetryPublisher(BrokerAccess(address), TELEMETRY, max_backoff_seconds=30.0)
    threads_before = link_threads()
    source.connect()
    publisher.start()
    try:
        wait_for(lambda: source.connected, 20, what="connected")
        wait_for(lambda: messages(caplog, "telemetry publisher connected"), 20, what="publisher")
        broker.kill()
        wait_for(lambda: not source.connected, 10, interval=0.1, what="the loss noticed")
        publisher.observe(None, matrix(0.3))  # a batch waiting for the broker
        time.sleep(5)  # failed attempts 0.5-1 s, 1-2 s, 2-4 s apart: now in a long wait
        assert 3 <= messages(caplog, "broker connect failed") <= 4  # backing off, not hammering
        for part in (source, publisher):
            began = time.monotonic()
            part.stop()
            assert time.monotonic() - began < 1.5, f"{type(part).__name__}.stop() took long"
        assert not source.connected
        assert link_threads() == threads_before
    finally:
        source.disconnect()
        publisher.stop()
