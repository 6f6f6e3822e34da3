"""StompSource over the in-memory broker: a stalled receiver's backlog shows as unread bytes and as
the messages' arrival lag (broker and source on one test clock, so the lag is exact), and a
subscription the broker refuses is never counted as connected. (That the real brokers fill the
socket behind a stalled receiver, and refuse that SUBSCRIBE so, is the connection contract's.)"""

from __future__ import annotations

import logging
import threading

import pytest

from devtools.stomp_client import BrokerClient
from devtools.waiting import wait_for
from service.broker.memory_broker import MemoryBroker
from service.ingest.backlog import LAG_WINDOW_SECONDS
from service.ingest.stomp_source import StompSource, SubscriptionSpec
from tests.clock import TestClock
from tests.frame_recorder import FrameRecorder

TOPIC = "/topic/nettel.test.unread"


def test_unread_bytes_grow_while_the_receiver_stalls_and_drain_after(clock: TestClock) -> None:
    broker = MemoryBroker("activemq", clock=clock)  # it stamps `timestamp` on the test clock
    release, received = threading.Event(), []

    def stall_on_first(frame: tuple[str, bytes, object]) -> None:
        received.append(frame[1])
        release.wait(30)  # holds the receiving thread: the backlog waits unread behind it

    source = StompSource(
        broker.access(),
        [TOPIC],
        FrameRecorder(stall_on_first),
        subscription=SubscriptionSpec(mode="plain"),
        clock=clock,
    )
    assert source.unread_bytes() == 0  # no connection yet
    source.connect()
    publisher = BrokerClient(broker.access())
    try:
        wait_for(lambda: source.connected, 20, what="connection")
        publisher.send(TOPIC, b"probe")
        wait_for(lambda: received, 20, what="a first message")  # now stalled
        assert source.arrival_lag_seconds() == 0.0  # taken in and arrived at the same moment
        body = b"x" * 4096
        for _ in range(200):  # 800 KB
            publisher.send(TOPIC, body)
        wait_for(lambda: source.unread_bytes() == 200 * len(body), 20, what="unread bytes")
        # the backlog arrives this much later; the probe's lag is more than two windows back
        waited = 2 * LAG_WINDOW_SECONDS + 0.5
        clock.advance(waited)
        release.set()
        wait_for(lambda: received.count(body) == 200, 20, what="every message")
        assert source.unread_bytes() == 0
        assert source.arrival_lag_seconds() == pytest.approx(waited)
    finally:
        release.set()
        publisher.close()
        source.disconnect()
    assert source.unread_bytes() == 0  # disconnected


def test_a_subscription_the_broker_refuses_is_not_counted_as_connected(
    memory_broker: MemoryBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """ActiveMQ answers a durable SUBSCRIBE to a queue with an ERROR and no RECEIPT: the source
    must not call that connected (/readyz would say ready with nothing subscribed)."""
    caplog.set_level(logging.WARNING, logger="nettel.stomp")
    source = StompSource(
        memory_broker.access(),
        ["/queue/nettel.test.refused"],
        FrameRecorder(),
        subscription=SubscriptionSpec(mode="durable", client_id="refused"),
        max_backoff_seconds=1.0,
    )
    source.connect()
    try:

        def refusal_logged() -> bool:
            return any(
                "cannot durably subscribe to a Queue" in getattr(record, "reason", "")
                for record in caplog.records
            )

        wait_for(refusal_logged, 30, what="the broker's refusal logged")
        assert not source.connected
    finally:
        source.disconnect()


def test_an_injected_error_frame_fails_the_subscription_until_the_broker_takes_it(
    memory_broker: MemoryBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nettel.stomp")
    memory_broker.refuse_next("SUBSCRIBE", "no room for another subscription")
    source = StompSource(
        memory_broker.access(),
        [TOPIC],
        FrameRecorder(),
        subscription=SubscriptionSpec(mode="plain"),
        max_backoff_seconds=1.0,
    )
    source.connect()
    try:
        wait_for(lambda: source.connected, 20, what="connected on the second attempt")
        reasons = [getattr(r, "reason", "") for r in caplog.records if "failed" in r.message]
        assert reasons == [f"SUBSCRIBE to {TOPIC} refused: no room for another subscription"]
        assert source.connections == 1
    finally:
        source.disconnect()
