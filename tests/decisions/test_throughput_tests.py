"""perfSONAR throughput tests in the decision world: TCP flows that load the path they measure."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'nettel[ns3]'")

from service.analysis.features import FEATURE_NAMES  # noqa: E402
from service.config import DEFAULT_BUNDLE  # noqa: E402
from service.model.bundle import load_bundle  # noqa: E402
from simulation.decision_world import (  # noqa: E402
    THROUGHPUT_REPEAT_S,
    THROUGHPUT_SLOT_GAP_S,
    DecisionScenario,
    DecisionWorld,
    ThroughputTests,
    draw_scenario,
    draw_throughput_tests,
)
from tests.decisions.test_decision_world import RATE_BPS, scenario  # noqa: E402
from training.decisions.run import ClosedLoop  # noqa: E402
from training.decisions.throughput import ARCHIVE_LAG_S  # noqa: E402

pytestmark = pytest.mark.slow
SIZE = 1_000_000


def with_tests(path: list[int], start_s: list[float], duration_s: float = 10.0) -> DecisionScenario:
    tests = ThroughputTests(np.array(path), np.array(start_s), duration_s)
    return replace(scenario(), throughput_tests=tests)


def test_a_test_alone_measures_the_path_and_a_transfer_beside_it_takes_half() -> None:
    with DecisionWorld(with_tests([0, 1], [1.0, 1.0])) as world:
        assert np.isnan(world.throughput_bps()).all()  # not ended yet
        world.run_until(12.0)
        alone = world.throughput_bps()
    with DecisionWorld(with_tests([0], [1.0])) as world:
        world.start_transfer(0, 1.0, 10 * SIZE)
        world.run_until(12.0)
        shared = world.throughput_bps()
    # 10 s of one Cubic stream on an idle 2 Mb/s path: the rate, less headers and slow start
    assert 0.8 * RATE_BPS < alone[0] < RATE_BPS
    assert 0.8 * RATE_BPS < alone[1] < alone[0]  # 40 ms one way: a slower start
    # beside a bulk transfer it gets about its fair share
    assert 0.3 * RATE_BPS < shared[0] < 0.65 * RATE_BPS


def test_a_transfer_overlapping_a_test_is_slower() -> None:
    def transfer_time(tests: list[float]) -> float:
        with DecisionWorld(with_tests([0] * len(tests), tests)) as world:
            transfer = world.start_transfer(0, 1.0, SIZE)
            world.run_until(40.0)
            done = world.completion_s(transfer)
        assert done is not None
        return done - 1.0

    quiet, test_after_it = transfer_time([]), transfer_time([30.0])
    during_a_test = transfer_time([0.5])
    assert test_after_it == quiet  # a test that has not started changes nothing
    assert during_a_test > 1.6 * quiet  # 12.7 s against 5.2 s


def test_tests_repeat_per_path_in_4_hour_windows_of_the_compressed_day_and_never_overlap() -> None:
    tests = draw_throughput_tests([3], paths=5, minutes=52)
    assert THROUGHPUT_REPEAT_S == 2400.0  # 4 h of family C's 240-minute day
    assert np.all(np.diff(tests.start_s) >= tests.duration_s + THROUGHPUT_SLOT_GAP_S)
    assert tests.end_s.max() <= 52 * 60.0
    first = tests.start_s < THROUGHPUT_REPEAT_S
    assert sorted(tests.path[first].tolist()) == [0, 1, 2, 3, 4]  # one per path per window
    assert np.bincount(tests.path, minlength=5).max() <= 2


def test_a_scenario_is_the_same_with_and_without_tests() -> None:
    plain, tested = draw_scenario(2, 1), draw_scenario(2, 1, throughput_tests=True)
    assert plain.throughput_tests is None and tested.throughput_tests is not None
    assert replace(tested, throughput_tests=None).summary() == plain.summary()
    assert np.array_equal(plain.requests.bytes, tested.requests.bytes)
    assert tested.summary()["throughput_tests"] == len(tested.throughput_tests)


def test_the_served_view_holds_each_paths_latest_archived_result_from_the_next_minute() -> None:
    # path 0's test ends at 51 s (archived 56 s), path 1's at 57.5 s (archived 62.5 s): only
    # path 0's is in minute 0's view, published at 62 s
    tests = with_tests([0, 1], [41.0, 47.5])
    predictor = load_bundle(DEFAULT_BUNDLE, FEATURE_NAMES)
    with ClosedLoop(tests, predictor, 1000) as loop:
        loop.advance()
        first = loop.history.views[-1]
        loop.advance()
        second = loop.history.views[-1]
        results = loop.throughput_results()
    assert 51.0 + ARCHIVE_LAG_S < first.published_s < 57.5 + ARCHIVE_LAG_S
    assert first.throughput_bps is not None and first.throughput_start_s is not None
    assert first.throughput_start_s[0] == 41.0 and np.isnan(first.throughput_start_s[1])
    assert 0.8 * RATE_BPS < first.throughput_bps[0] < RATE_BPS
    assert np.isnan(first.throughput_bps[1])
    assert second.throughput_start_s is not None
    assert second.throughput_start_s.tolist() == [41.0, 47.5]
    assert [r[:2] for r in results] == [[0, 41.0], [1, 47.5]]
    assert results[0][2] == round(float(first.throughput_bps[0]))
    assert (
        "throughput_bps" in second.record()
        and "throughput_bps" not in replace(second, throughput_bps=None).record()
    )
