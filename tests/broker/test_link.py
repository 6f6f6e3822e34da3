"""BrokerLink's reconnect policy, without a broker: backoff grows, is jittered and capped."""

from __future__ import annotations

import time

from service.broker.link import BrokerAccess, BrokerLink, backoff_seconds

SAMPLES = 200


def delays(failures: int, cap: float) -> list[float]:
    return [backoff_seconds(failures, cap) for _ in range(SAMPLES)]


def test_backoff_doubles_with_each_failure_until_the_cap():
    cap = 30.0
    previous = delays(1, cap)
    assert 0.5 <= min(previous) and max(previous) <= 1.0
    for failures in range(2, 6):  # 1-2 s, 2-4 s, 4-8 s, 8-16 s
        current = delays(failures, cap)
        assert min(current) >= max(previous)  # never shorter than any wait before it
        assert 0.25 * 2**failures <= min(current) and max(current) <= 0.5 * 2**failures
        previous = current
    assert all(15.0 <= wait <= cap for wait in delays(6, cap))  # 16-32 s, capped at 30 s


def test_backoff_is_capped_and_jittered_however_many_failures():
    for failures in (8, 20, 10_000):
        waits = delays(failures, 5.0)
        assert all(2.5 <= wait <= 5.0 for wait in waits)
        assert len(set(waits)) > SAMPLES // 2  # jitter: reconnecting clients spread out


def test_an_unstarted_link_is_down_and_stops_at_once():
    link = BrokerLink(BrokerAccess([("127.0.0.1", 9)]))
    assert not link.connected and link.connection is None
    assert link.wait_connected(0.01) is None
    began = time.monotonic()
    link.stop()
    assert time.monotonic() - began < 0.5
    assert link.disconnected_seconds() > 0
