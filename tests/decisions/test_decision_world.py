"""The decision world in ns-3: transfers as real TCP flows on candidate paths to one destination."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'nettel[ns3]'")

from simulation.decision_world import (  # noqa: E402
    DecisionScenario,
    DecisionWorld,
    Requests,
    SharedSegment,
    draw_scenario,
)
from simulation.simulator_ns3 import LinkDraw, TrafficSchedule, draw_link  # noqa: E402

pytestmark = pytest.mark.slow
MINUTES = 2
RATE_BPS = 2e6
EMPTY = np.zeros(0)


def quiet_path(index: int, propagation_ms: float) -> LinkDraw:
    """A 2 Mb/s FIFO path with no cross traffic and the given one-way delay."""
    draw = draw_link(index, MINUTES, 7, 0.0)
    no_flows = np.zeros(0, np.int64)
    nothing = TrafficSchedule(
        EMPTY, EMPTY, EMPTY, no_flows, no_flows, EMPTY, EMPTY, EMPTY, EMPTY, EMPTY, EMPTY
    )
    return replace(
        draw, idle=True, rate_bps=RATE_BPS, qdisc="fifo", queue_packets=40,
        bottleneck_delay_ms=propagation_ms, far_sender_ms=1.0, has_hop2=False,
        hop2_rate_bps=0.0, hop2_delay_ms=0.0, hop2_queue_packets=0, clock_offset_ms=0.0,
        traffic=nothing,
    )  # fmt: skip


def scenario(shared: SharedSegment | None = None) -> DecisionScenario:
    return DecisionScenario(
        seed=0, index=0, herding=False, minutes=MINUTES, run=1,
        paths=(quiet_path(0, 10.0), quiet_path(1, 40.0)), shared=shared,
        requests=Requests(EMPTY, EMPTY), choice_seed=0,
    )  # fmt: skip


def test_a_transfer_on_an_idle_path_takes_about_its_size_at_the_link_rate() -> None:
    size = 1_000_000
    with DecisionWorld(scenario()) as world:
        fast = world.start_transfer(0, 1.0, size)
        far = world.start_transfer(1, 1.0, size)
        world.run_until(60.0)
        delays = world.minute_delays(0)
        done = [world.completion_s(fast), world.completion_s(far)]
    at_rate = size * 8 / RATE_BPS  # 4 s of payload, plus headers and slow start
    assert done[0] is not None and at_rate < done[0] - 1.0 < 1.4 * at_rate
    assert done[1] is not None and done[1] > done[0]  # the longer RTT's slow start
    # the probes saw each path's propagation delay, and the queue the transfer built
    assert np.nanmin(delays[0]) == pytest.approx(10.0, abs=0.5)
    assert np.nanmin(delays[1]) == pytest.approx(40.0, abs=0.5)
    assert np.nanmax(delays[0]) > 10.0 + 20.0


def test_transfers_on_one_path_slow_each_other_down() -> None:
    size = 1_000_000
    with DecisionWorld(scenario()) as world:
        apart = [world.start_transfer(p, 1.0, size) for p in (0, 1)]
        world.run_until(30.0)
        alone = world.completion_s(apart[0])
    with DecisionWorld(scenario()) as world:
        together = [world.start_transfer(0, 1.0, size) for _ in range(2)]
        world.run_until(30.0)
        both = [world.completion_s(t) for t in together]
    finished = [b for b in both if b is not None]
    assert alone is not None and len(finished) == 2
    assert max(finished) - 1.0 > 1.7 * (alone - 1.0)


def test_cross_traffic_on_a_shared_segment_shows_on_both_paths() -> None:
    busy = SharedSegment(
        paths=(0, 1), rate_bps=2.4e6, delay_ms=1.0, queue_packets=30,
        cross_start=np.array([0.0]), cross_stop=np.array([120.0]),
        cross_rate_bps=np.array([2.6e6]),
    )  # fmt: skip
    with DecisionWorld(scenario(busy)) as world:
        world.run_until(62.0)
        delays = world.minute_delays(0)
    loss = np.isnan(delays).mean(axis=1)
    assert (loss > 0.02).all()  # the overloaded shared FIFO drops probes of both paths
    assert (np.nanmedian(delays, axis=1) > np.array([10.0, 40.0]) + 20.0).all()


def test_the_same_seed_draws_the_same_scenario() -> None:
    one, two = draw_scenario(5, 3), draw_scenario(5, 3)
    assert one.summary() == two.summary()
    assert np.array_equal(one.requests.arrival_s, two.requests.arrival_s)
    assert 2 <= len(one.paths) <= 5
    assert draw_scenario(5, 4).summary() != one.summary()
