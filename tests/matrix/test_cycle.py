"""MatrixCycle's schedule: data-triggered recomputes wait while ingest works off a backlog."""

from __future__ import annotations

import time

import pytest

from devtools.waiting import wait_for
from service.ingest.backlog import BEHIND_PERSIST_SECONDS, BEHIND_QUIET_SECONDS, BacklogWatch
from service.ingest.pipeline import IngestPipeline
from service.matrix.cycle import MatrixCycle, recompute_gap
from service.parse.records import MeasurementKind
from service.state.link_state import LinkState
from tests.message_factory import sample_body

LOSS_TOPIC = "/topic/perfsonar.raw.packet-loss-rate"
NOW = 1_700_000_200.0  # the loss sample's datapoints fit the window


class CycleTicks:
    """A hand-moved monotonic clock for a cycle and its BacklogWatch, and the cycle thread's
    ticks counted by the backlog polls."""

    def __init__(self) -> None:
        self.now = 0.0
        self.behind = False
        self.polls = 0

    def backlog(self) -> bool:
        self.polls += 1
        return self.behind

    def pass_ticks(self, count: int = 3) -> None:
        """Wait until the cycle thread has polled `count` more times (acted on what it saw)."""
        target = self.polls + count
        wait_for(lambda: self.polls >= target, 5.0, 0.005, what=f"{count} cycle ticks")

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.pass_ticks()


def test_fresh_data_waits_for_the_backlog_then_reaches_the_matrix() -> None:
    pipeline = IngestPipeline(LinkState(), {LOSS_TOPIC: MeasurementKind.LOSS}, clock=lambda: NOW)
    ticks = CycleTicks()
    cycle = MatrixCycle(
        pipeline.state,
        interval=60.0,
        freshness=0.2,
        clock=lambda: NOW,
        behind=BacklogWatch(ticks.backlog, clock=lambda: ticks.now),
        monotonic=lambda: ticks.now,
    )
    cycle.start()
    try:
        first = wait_for(lambda: cycle.latest, 5.0, 0.02, what="the first, interval cycle")
        ticks.behind = True  # a back-fill under way: its backlog was seen for a while
        ticks.pass_ticks()
        ticks.advance(BEHIND_PERSIST_SECONDS + 0.2)
        pipeline.handle_frame(LOSS_TOPIC, sample_body("packet-loss-rate.json"))
        ticks.advance(1.0)  # five freshness periods
        assert cycle.latest is first and len(first.links) == 0

        ticks.behind = False
        ticks.pass_ticks()
        ticks.advance(BEHIND_QUIET_SECONDS - 0.1)
        assert cycle.latest is first  # not on the first gap
        ticks.advance(0.2)
        wait_for(lambda: cycle.latest is not first, 3.0, 0.02, what="the caught-up recompute")
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
        wait_for(lambda: cycle.latest, 5.0, 0.02, what="the first cycle")
        first = cycle.latest
        arrived = time.monotonic()
        burst_until[0] = arrived + BEHIND_PERSIST_SECONDS / 2
        pipeline.handle_frame(LOSS_TOPIC, sample_body("packet-loss-rate.json"))
        wait_for(lambda: cycle.latest is not first, 3.0, 0.02, what="a recompute")
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
        wait_for(lambda: cycle.latest, 5.0, 0.02, what="the first cycle")
        first = cycle.latest
        pipeline.handle_frame(LOSS_TOPIC, sample_body("packet-loss-rate.json"))
        wait_for(lambda: cycle.latest is not first, 1.4, 0.02, what="a recompute within 1.4 s")
        assert len(cycle.latest.links) == 1
    finally:
        cycle.stop()
