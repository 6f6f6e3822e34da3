"""StompSource.arrival_lag_seconds: arrival time minus the broker's `timestamp` stamp."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from service.broker.link import BrokerAccess
from service.ingest.backlog import ArrivalLag, ingest_is_behind
from service.ingest.stomp_source import StompSource
from tests.frame_recorder import FrameRecorder

NOW = 1_700_000_000.0


def idle_source(clock: Callable[[], float] = time.time) -> StompSource:
    """A source that is never started: frames are handed to `deliver` directly."""
    return StompSource(
        BrokerAccess([("127.0.0.1", 61613)]), ["/topic/t"], FrameRecorder(), clock=clock
    )


def milliseconds_ago(seconds: float, now: float | None = None) -> str:
    return str(int(((time.time() if now is None else now) - seconds) * 1000))


def test_lag_is_the_last_message_arrival_minus_its_broker_stamp() -> None:
    now = [NOW]
    source = idle_source(lambda: now[0])
    assert source.arrival_lag_seconds() is None
    source.deliver({"timestamp": milliseconds_ago(30, NOW)}, b"{}")
    assert source.arrival_lag_seconds() == pytest.approx(30.0)
    now[0] += 1.0
    source.deliver({"timestamp": milliseconds_ago(0, now[0])}, b"{}")
    assert source.arrival_lag_seconds() == pytest.approx(0.0)
    now[0] += 60.0  # the lag is fixed at arrival; it does not grow while nothing comes
    assert source.arrival_lag_seconds() == pytest.approx(0.0)


def test_no_lag_without_a_stamp_in_epoch_milliseconds() -> None:
    source = idle_source()
    for headers in ({}, {"timestamp": "soon"}, {"timestamp": str(int(time.time()))}):
        source.deliver(headers, b"{}")  # the last: seconds, as netTel's own output carries
        assert source.arrival_lag_seconds() is None


def test_one_producers_old_stamps_do_not_make_everyone_late() -> None:
    """The attack: a producer sets `timestamp` an hour back on its messages (ActiveMQ keeps a
    producer's stamp). Among fresh messages the lag stays low; ingest is not behind."""
    source = idle_source()
    for _ in range(5):
        source.deliver({"timestamp": milliseconds_ago(3600)}, b"{}")
        source.deliver({"timestamp": milliseconds_ago(0.05)}, b"{}")
        source.deliver({"timestamp": milliseconds_ago(3600)}, b"{}")
    lag = source.arrival_lag_seconds()
    assert lag is not None and lag < 1
    assert not ingest_is_behind(0, 0, lag)


def test_a_backlog_at_the_broker_shows_when_every_message_is_late() -> None:
    lag = ArrivalLag(window=1.0)
    for second in range(3):
        lag.observe(str((1000 + second) * 1000), 1000 + second + 30.0)
    assert lag.seconds() == 30.0
    lag.observe("1005000", 1033.2)  # a fresh one among them: the least counts
    assert lag.seconds() == pytest.approx(28.2)
    lag.observe("1040000", 1045.0)  # two periods on: the late ones are forgotten
    assert lag.seconds() == 5.0
