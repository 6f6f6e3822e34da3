"""StompSource on a real broker: a stalled receiver's backlog shows as unread socket bytes and
as the messages' arrival lag."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from devtools.activemq import ActiveMQProcess
from devtools.stomp_client import StompClient
from devtools.waiting import wait_for
from service.broker.link import BrokerAccess
from service.ingest.backlog import LAG_WINDOW_SECONDS
from service.ingest.stomp_source import StompSource, SubscriptionSpec
from tests.frame_recorder import FrameRecorder

pytestmark = pytest.mark.broker
TOPIC = "/topic/nettel.test.unread"


def test_unread_bytes_grow_while_the_receiver_stalls_and_drain_after(
    activemq: ActiveMQProcess,
) -> None:
    release, received = threading.Event(), []
    waited = [0.0]  # seconds the test moves the source's clock on

    def stall_on_first(frame: object) -> None:
        received.append(frame)
        release.wait(30)  # holds stomp.py's receiver thread: the socket fills behind it

    source = StompSource(
        # a long heart-beat: the stall must not look like a dead connection (messages lost)
        BrokerAccess([("127.0.0.1", activemq.stomp_port)], heartbeat_ms=60_000),
        [TOPIC],
        FrameRecorder(stall_on_first),
        subscription=SubscriptionSpec(mode="plain"),
        clock=lambda: time.time() + waited[0],
    )
    assert source.unread_bytes() == 0  # no connection yet
    source.connect()
    publisher = StompClient(f"127.0.0.1:{activemq.stomp_port}")
    try:
        wait_for(lambda: source.connected, 20, what="connection")

        def probe_received() -> bool:
            publisher.send(TOPIC, b"probe")
            return bool(received)

        wait_for(probe_received, 20, interval=0.2, what="a first message")  # now stalled
        lag = source.arrival_lag_seconds()
        assert lag is not None and -1.0 < lag < 1.0  # same clock; live messages take ms
        body = b"x" * 4096
        for _ in range(200):  # 800 KB
            publisher.send(TOPIC, body)
        # a stalled reader's socket buffer stays at its initial size (~128 KB on Linux); a
        # draining one grows it, which is where BACKLOG_UNREAD_BYTES was seen exceeded
        wait_for(lambda: source.unread_bytes() > 64 * 1024, 20, what="unread bytes")
        # the last message has now waited at least 1.5 s, and the probe's fresh lag is more
        # than the two lag windows back (ArrivalLag: the least lag of the last one or two)
        waited[0] = max(1.5, 2 * LAG_WINDOW_SECONDS + 0.5)
        release.set()
        wait_for(lambda: received.count(body) == 200, 20, what="every message")
        assert source.unread_bytes() == 0
        assert source.arrival_lag_seconds() >= 1.4  # type: ignore[operator]
    finally:
        release.set()
        publisher.close()
        source.disconnect()
    assert source.unread_bytes() == 0  # disconnected


def test_a_subscription_the_broker_refuses_is_not_counted_as_connected(
    activemq: ActiveMQProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """ActiveMQ answers a durable SUBSCRIBE to a queue with an ERROR and no RECEIPT: the source
    must not call that connected (/readyz would say ready with nothing subscribed)."""
    caplog.set_level(logging.WARNING, logger="nettel.stomp")
    source = StompSource(
        BrokerAccess([("127.0.0.1", activemq.stomp_port)]),
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
