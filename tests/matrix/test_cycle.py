"""MatrixCycle's schedule: data-triggered recomputes wait while ingest works off a backlog."""

from __future__ import annotations

import time

import pytest

from service.ingest.backlog import BEHIND_PERSIST_SECONDS, BEHIND_QUIET_SECONDS, BacklogWatch
from service.ingest.pipeline import IngestPipeline
from service.matrix.cycle import MatrixCycle, recompute_gap
from service.parse.records import MeasurementKind
from service.state.link_state import LinkState
from tests.message_factory import sample_body

LOSS_TOPIC = "/topic/perfsonar.raw.packet-loss-rate"
NOW = 1_700_000_200.0  # the loss sample's datapoints fit the window


def wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_fresh_data_waits_for_the_backlog_then_reaches_the_matrix() -> None:
    pipeline = IngestPipeline(LinkState(), {LOSS_TOPIC: MeasurementKind.LOSS}, clock=lambda: NOW)
    behind = [False]
    cycle = MatrixCycle(
        pipeline.state,
        interval=60.0,
        freshness=0.2,
        clock=lambda: NOW,
        behind=BacklogWatch(lambda: behind[0]),
    )
    cycle.start()
    try:
        assert wait_until(lambda: cycle.latest is not None, 5.0)  # the first, interval cycle
        first = cycle.latest
        behind[0] = True  # a back-fill under way: its backlog was seen for a while
        time.sleep(BEHIND_PERSIST_SECONDS + 0.2)
        pipeline.handle_frame(LOSS_TOPIC, sample_body("packet-loss-rate.json"))
        time.sleep(1.0)  # five freshness periods
        assert cycle.latest is first and len(first.links) == 0

        behind[0] = False
        caught_up = time.monotonic()
        assert wait_until(lambda: cycle.latest is not first, 3.0)
        assert time.monotonic() - caught_up >= BEHIND_QUIET_SECONDS - 0.1  # not on the first gap
        assert len(cycle.latest.links) == 1
    finally:
        cycle.stop()


def test_a_short_burst_does_not_hold_fresh_data_back() -> None:
    """The burst that builds up while a recompute holds the GIL is no back-fill."""
    pipeline = IngestPipeline(LinkState(), {LOSS_TOPIC: MeasurementKind.LOSS}, clock=lambda: NOW)
    burst_until = [0.0]
    cycle = MatrixCycle(
        pipeline.state,
        interval=60.0,
        freshness=0.2,
        clock=lambda: NOW,
        behind=BacklogWatch(lambda: time.monotonic() < burst_until[0]),
    )
    cycle.start()
    try:
        assert wait_until(lambda: cycle.latest is not None, 5.0)
        first = cycle.latest
        arrived = time.monotonic()
        burst_until[0] = arrived + BEHIND_PERSIST_SECONDS / 2
        pipeline.handle_frame(LOSS_TOPIC, sample_body("packet-loss-rate.json"))
        assert wait_until(lambda: cycle.latest is not first, 3.0)
        assert time.monotonic() - arrived < BEHIND_QUIET_SECONDS  # held back, it would take longer
    finally:
        cycle.stop()


def test_recomputes_are_spaced_for_freshness_unless_their_cpu_time_asks_for_more() -> None:
    assert recompute_gap(1.0, 0.4, 0.1) == pytest.approx(0.6)  # new data visible within 1 s
    assert recompute_gap(1.0, 0.4, 0.3) == pytest.approx(1.5)  # at most a fifth of a core
    assert recompute_gap(1.0, 1.3, 0.1) == pytest.approx(0.5)  # slower than `freshness`


def test_waiting_inside_a_recompute_does_not_space_out_the_next_one() -> None:
    """The duty factor counts the cycle's CPU time; time spent waiting (as for the GIL) is free."""

    def waiting_clock() -> float:
        time.sleep(0.4)  # five of these would hold the next recompute back by 2 s
        return NOW

    pipeline = IngestPipeline(LinkState(), {LOSS_TOPIC: MeasurementKind.LOSS}, clock=lambda: NOW)
    cycle = MatrixCycle(pipeline.state, interval=60.0, freshness=0.2, clock=waiting_clock)
    cycle.start()
    try:
        assert wait_until(lambda: cycle.latest is not None, 5.0)
        first = cycle.latest
        pipeline.handle_frame(LOSS_TOPIC, sample_body("packet-loss-rate.json"))
        assert wait_until(lambda: cycle.latest is not first, 1.4)
        assert len(cycle.latest.links) == 1
    finally:
        cycle.stop()
