"""compute_features: netTel's 45 history features and the 5 newest-minute features on
constructed 32-minute series."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.analysis.features import (
    FEATURE_NAMES,
    HISTORY_FEATURE_NAMES,
    HISTORY_POINTS,
    NEWEST_FEATURE_NAMES,
    AllTimeStats,
    LinkWindows,
    NewestMinute,
    complete_rows,
    compute_features,
    compute_history_features,
)

COLUMN = {name: i for i, name in enumerate(FEATURE_NAMES)}
MINUTES = np.arange(32, dtype=float)


def windows(
    delay: np.ndarray, loss: np.ndarray, median_offset: float = 1.0, std: float = 2.0
) -> LinkWindows:
    delay = np.atleast_2d(delay)
    return LinkWindows(
        delay_mean=delay,
        delay_median=delay + median_offset,
        delay_std=np.where(np.isnan(delay), np.nan, std),
        loss=np.atleast_2d(loss),
    )


def all_time(rows: int = 1, values: tuple[float, ...] = (15.5, 9.0, 0.0, 0.01, 0.002)):
    return AllTimeStats(*(np.full(rows, v) for v in values))


def feature(row: np.ndarray, name: str) -> float:
    return float(row[COLUMN[name]])


def test_feature_names_are_netTels_45_then_5_of_the_newest_minute() -> None:
    assert len(FEATURE_NAMES) == 50
    assert len(set(FEATURE_NAMES)) == 50
    assert FEATURE_NAMES == (*HISTORY_FEATURE_NAMES, *NEWEST_FEATURE_NAMES)
    assert len(HISTORY_FEATURE_NAMES) == 45
    assert FEATURE_NAMES[:6] == (
        "delay_mean_smoothed",
        "delay_median_smoothed",
        "delay_std_smoothed",
        "loss_smoothed",
        "delay_gradient",
        "loss_gradient",
    )
    assert HISTORY_FEATURE_NAMES[-4:] == (
        "delay_history_mean",
        "delay_history_std",
        "loss_history_mean",
        "loss_history_std",
    )


def test_ramp_delay_and_constant_loss() -> None:
    features = compute_history_features(windows(MINUTES, np.full(32, 0.01)), all_time())
    assert features.shape == (1, 45)
    row = features[0]
    # 15-point MA of 0..31: column j = j + 7, the last one 24; the last 15 are 10..24.
    assert feature(row, "delay_mean_smoothed") == pytest.approx(24.0, rel=1e-12)
    assert feature(row, "delay_median_smoothed") == pytest.approx(25.0, rel=1e-12)
    assert feature(row, "delay_std_smoothed") == pytest.approx(2.0, rel=1e-12)
    assert feature(row, "loss_smoothed") == pytest.approx(0.01, rel=1e-12)
    assert feature(row, "delay_gradient") == pytest.approx(1.0, rel=1e-12)
    assert feature(row, "loss_gradient") == pytest.approx(0.0, abs=1e-15)
    lags = [feature(row, f"delay_smoothed_lag{lag}") for lag in range(14, -1, -1)]
    assert lags == pytest.approx([float(v) for v in range(10, 25)], rel=1e-12)
    loss_lags = [feature(row, f"loss_smoothed_lag{lag}") for lag in range(14, -1, -1)]
    assert loss_lags == pytest.approx([0.01] * 15, rel=1e-12)
    assert feature(row, "delay_history_mean") == pytest.approx(17.0, rel=1e-12)
    assert feature(row, "delay_history_std") == pytest.approx(math.sqrt(56 / 3), rel=1e-12)
    assert feature(row, "loss_history_mean") == pytest.approx(0.01, rel=1e-12)
    assert feature(row, "loss_history_std") == pytest.approx(0.0, abs=1e-15)


def test_all_time_columns_are_copied_in_order() -> None:
    values = (15.5, 9.0, 0.25, 0.01, 0.002)
    row = compute_history_features(windows(MINUTES, np.full(32, 0.01)), all_time(1, values))[0]
    names = ["delay_mean", "delay_std", "delay_min", "loss_mean", "loss_std"]
    assert [feature(row, f"alltime_{n}") for n in names] == list(values)


def test_decreasing_loss_gives_negative_gradient_and_rows_are_independent() -> None:
    delay = np.vstack([MINUTES, np.full(32, 5.0)])
    loss = np.vstack([np.full(32, 0.0), 0.031 - MINUTES / 1000])  # 0.031 .. 0.000
    features = compute_history_features(windows(delay, loss), all_time(2))
    first, second = features
    assert feature(first, "delay_gradient") == pytest.approx(1.0, rel=1e-12)
    assert feature(second, "delay_gradient") == pytest.approx(0.0, abs=1e-12)
    assert feature(second, "delay_mean_smoothed") == pytest.approx(5.0, rel=1e-12)
    # loss MA at the end: mean of 0.031 - (17..31)/1000 = 0.031 - 0.024 = 0.007
    assert feature(second, "loss_smoothed") == pytest.approx(0.007, rel=1e-9)
    assert feature(second, "loss_gradient") == pytest.approx(-0.001, rel=1e-9)
    lags = np.array([0.031 - (j + 7) / 1000 for j in range(3, 18)])
    assert feature(second, "loss_history_mean") == pytest.approx(lags.mean(), rel=1e-9)
    assert feature(second, "loss_history_std") == pytest.approx(lags.std(), rel=1e-9)


def test_gaps_are_averaged_over_present_minutes() -> None:
    delay = MINUTES.copy()
    delay[-1] = np.nan  # newest minute missing: last MA covers 17..30
    row = compute_history_features(windows(delay, np.full(32, 0.01)), all_time())[0]
    assert feature(row, "delay_mean_smoothed") == pytest.approx(23.5, rel=1e-12)
    assert feature(row, "delay_gradient") == pytest.approx(23.5 - 23.0, rel=1e-12)


def test_complete_rows_false_with_only_a_few_minutes() -> None:
    few = np.full(32, np.nan)
    few[-3:] = [1.0, 2.0, 3.0]
    delay = np.vstack([MINUTES, few])
    loss = np.vstack([np.full(32, 0.01), np.where(np.isnan(few), np.nan, 0.01)])
    features = compute_history_features(windows(delay, loss), all_time(2))
    assert complete_rows(features).tolist() == [True, False]
    # The newest values are still computed for the short link; only older lags are missing.
    assert feature(features[1], "delay_mean_smoothed") == pytest.approx(2.0)
    assert HISTORY_POINTS == 15
    assert np.isnan(feature(features[1], "delay_smoothed_lag14"))


def test_complete_rows_false_when_all_time_stats_are_missing() -> None:
    stats = AllTimeStats(*(np.array([v]) for v in (1.0, 1.0, np.nan, 0.0, 0.0)))
    features = compute_history_features(windows(MINUTES, np.full(32, 0.01)), stats)
    assert complete_rows(features).tolist() == [False]


def newest_minute(*values: float, congested: bool = False) -> NewestMinute:
    *delays, loss = values
    return NewestMinute(*(np.array([v]) for v in (*delays, loss)), np.array([congested]))


def test_newest_minute_features_are_differences_free_of_clock_offsets() -> None:
    stats = all_time(1, (15.5, 9.0, 10.0, 0.01, 0.002))
    row = compute_features(
        windows(MINUTES, np.full(32, 0.01)),
        stats,
        newest_minute(31.0, 4.5, 28.5, 0.05, congested=True),  # mean, std, median, loss
    )[0]
    assert feature(row, "newest_delay_above_min") == 21.0  # 31 - the all-time minimum 10
    assert feature(row, "newest_delay_std") == 4.5
    assert feature(row, "newest_mean_above_median") == 2.5
    assert feature(row, "newest_loss") == 0.05
    assert feature(row, "newest_filter_congested") == 1.0
    # The history columns are netTel's, unchanged by the newest minute.
    history = compute_history_features(windows(MINUTES, np.full(32, 0.01)), stats)[0]
    assert row[: len(HISTORY_FEATURE_NAMES)].tolist() == history.tolist()
    # A constant clock offset moves every delay and the all-time minimum alike.
    shifted = compute_features(
        windows(MINUTES - 18.5, np.full(32, 0.01)),
        all_time(1, (15.5 - 18.5, 9.0, 10.0 - 18.5, 0.01, 0.002)),
        newest_minute(31.0 - 18.5, 4.5, 28.5 - 18.5, 0.05, congested=True),
    )[0]
    for name in NEWEST_FEATURE_NAMES:
        assert feature(shifted, name) == pytest.approx(feature(row, name))


def test_a_link_without_a_newest_histogram_has_no_complete_row() -> None:
    row = compute_features(
        windows(MINUTES, np.full(32, 0.01)),
        all_time(),
        newest_minute(np.nan, np.nan, np.nan, 0.0),
    )
    assert complete_rows(row).tolist() == [False]
