"""The delay baseline sketch: known quantiles, exact means, decay, a moving window, its size."""

from __future__ import annotations

import numpy as np
import pytest

from service.alarms.baseline import BINS, BYTES_PER_LINK, GAMMA, TAU_MINUTES, DelayBaseline


def filled(values: np.ndarray, minute0: int = 0) -> DelayBaseline:
    """A one-link baseline fed `values`, one a minute."""
    baseline = DelayBaseline(1)
    for offset, value in enumerate(values):
        baseline.add(np.array([0]), np.array([value]), np.array([0.3]), minute0 + offset)
    return baseline


def test_bytes_per_link_are_stated_and_held() -> None:
    assert BYTES_PER_LINK == BINS * 4 + 4 + 4 + 2 == 138
    assert DelayBaseline(1000).nbytes() == 1000 * BYTES_PER_LINK


def test_quantiles_of_a_uniform_spread_fall_within_half_a_bin() -> None:
    values = np.linspace(10.0, 30.0, 2001)  # one a minute for a day and a half, over 20 ms
    stats = filled(values).stats(len(values))
    # weights decay by at most exp(-2000 / TAU) = 0.67 across the run, which shifts the
    # quantiles towards the newer (larger) values by a little: compare with the weighted ones
    weights = np.exp(np.arange(len(values)) / TAU_MINUTES)
    cumulative = np.cumsum(weights) / weights.sum()
    for estimate, q in ((stats.p25, 0.25), (stats.p75, 0.75), (stats.p95, 0.95)):
        exact = values[np.searchsorted(cumulative, q)]
        assert estimate[0] == pytest.approx(exact, rel=(GAMMA - 1) / 2)
    assert stats.mean[0] == pytest.approx(np.average(values, weights=weights), rel=1e-5)
    assert stats.jitter[0] == pytest.approx(0.3, rel=1e-5)
    # the weight over one minute's weight now (minute 2001): about the minutes held
    assert stats.minutes[0] == pytest.approx(weights.sum() / np.exp(2001 / TAU_MINUTES), rel=1e-3)


def test_a_constant_delay_reads_back_within_its_bin() -> None:
    stats = filled(np.full(100, 50.0)).stats(100)
    assert 50.0 / GAMMA <= stats.p25[0] <= stats.p95[0] <= 50.0 * GAMMA
    assert stats.mean[0] == pytest.approx(50.0)


def test_old_minutes_weigh_less_than_new_ones() -> None:
    old, new = np.full(500, 10.0), np.full(500, 40.0)
    stats = filled(np.concatenate([old, new]), minute0=0).stats(1000)
    weight_old = np.exp(np.arange(500) / TAU_MINUTES).sum()
    weight_new = np.exp(np.arange(500, 1000) / TAU_MINUTES).sum()
    expected = (10.0 * weight_old + 40.0 * weight_new) / (weight_old + weight_new)
    assert stats.mean[0] == pytest.approx(expected, rel=1e-5)


def test_weights_are_rescaled_before_they_grow_too_large() -> None:
    baseline = filled(np.full(10, 20.0))
    far = int(31 * TAU_MINUTES)  # past the rescale point
    baseline.add(np.array([0]), np.array([20.0]), np.array([0.3]), far)
    assert baseline.epoch_minute == far
    assert np.isfinite(baseline.weights).all() and baseline.weights.max() <= 2.0


def test_the_window_follows_a_delay_that_moved_for_good() -> None:
    values = np.concatenate([np.full(50, 10.0), np.full(200, 200.0)])  # 20 x: beyond the window
    stats = filled(values).stats(len(values))
    assert stats.p95[0] == pytest.approx(200.0, rel=GAMMA - 1)
    assert stats.p75[0] == pytest.approx(200.0, rel=GAMMA - 1)
    # the old minutes merged into the new window's lowest bin, 6 bins under the new delay
    assert stats.p25[0] == pytest.approx(200.0 / GAMMA**6, rel=GAMMA - 1)


def test_links_have_baselines_of_their_own_and_rows_move_with_take() -> None:
    baseline = DelayBaseline(3)
    for minute in range(20):
        baseline.add(np.arange(3), np.array([5.0, 50.0, np.nan]), np.array([0.1, 1.0, 0.1]), minute)
    stats = baseline.stats(20)
    assert stats.mean[:2] == pytest.approx([5.0, 50.0])
    assert np.isnan(stats.mean[2]) and np.isnan(stats.p95[2])
    baseline.take(np.array([1, -1]), 2)  # row 1 moves to 0; a new empty row 1
    moved = baseline.stats(20)
    assert moved.mean[0] == pytest.approx(50.0) and np.isnan(moved.mean[1])
