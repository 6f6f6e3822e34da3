"""The 50 link features: netTel's 45 smoothed-history features and 5 of the newest minute.

The single definition shared by the service and the training pipeline, so a model sees in serving
exactly what it saw in training. Input windows are (links x 32) arrays ordered oldest -> newest
with NaN for missing minutes; all-time statistics come from `AllTimeStats`.

netTel's inputs are 15-minute moving averages, so a link that saturates shows late and blurred.
The newest-minute features carry what the empirical filter sees a minute after a queue builds:
the newest histogram's mean delay above the link's all-time minimum, its spread (std) and tail
(mean above median: queueing skews a minute's delays to the right), the newest loss, and the
filter's own verdict on that minute. All are differences of delays, free of clock offsets, and
all come from statistics every perfSONAR archive keeps (the ps_owd documents have no minimum or
percentiles).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

SMOOTHING_POINTS = 15
HISTORY_POINTS = 15
ALL_TIME_NAMES = ("delay_mean", "delay_std", "delay_min", "loss_mean", "loss_std")
HISTORY_FEATURE_NAMES: tuple[str, ...] = (
    "delay_mean_smoothed",
    "delay_median_smoothed",
    "delay_std_smoothed",
    "loss_smoothed",
    "delay_gradient",
    "loss_gradient",
    *(f"alltime_{name}" for name in ALL_TIME_NAMES),
    *(f"delay_smoothed_lag{lag}" for lag in range(HISTORY_POINTS - 1, -1, -1)),
    *(f"loss_smoothed_lag{lag}" for lag in range(HISTORY_POINTS - 1, -1, -1)),
    "delay_history_mean",
    "delay_history_std",
    "loss_history_mean",
    "loss_history_std",
)
NEWEST_FEATURE_NAMES: tuple[str, ...] = (
    "newest_delay_above_min",
    "newest_delay_std",
    "newest_mean_above_median",
    "newest_loss",
    "newest_filter_congested",
)
FEATURE_NAMES: tuple[str, ...] = (*HISTORY_FEATURE_NAMES, *NEWEST_FEATURE_NAMES)


def feature_list_problem(
    names: tuple[str, ...], known: tuple[str, ...] = FEATURE_NAMES
) -> str | None:
    """Why `names` cannot be a model's inputs (none, unknown or repeated features); None if
    they can. One check for `nettel train --inputs`, training and the bundle reader.

    >>> feature_list_problem(("newest_loss", "newest_loss"))
    'newest_loss is named twice'
    >>> feature_list_problem(("newest_loss", "nope")), feature_list_problem(NEWEST_FEATURE_NAMES)
    ("features this nettel does not compute: ['nope']", None)
    """
    if not names:
        return "no features named"
    if unknown := [name for name in names if name not in known]:
        return f"features this nettel does not compute: {unknown[:5]}"
    if twice := sorted({name for name in names if names.count(name) > 1}):
        return f"{', '.join(twice)} {'is' if len(twice) == 1 else 'are'} named twice"
    return None


def feature_columns(names: tuple[str, ...], known: tuple[str, ...] = FEATURE_NAMES) -> list[int]:
    """Where each of `names` sits in rows of `known` features."""
    return [known.index(name) for name in names]


@dataclass(frozen=True)
class LinkWindows:
    """Time-ordered per-minute series of every link (links x minutes, NaN = no measurement)."""

    delay_mean: np.ndarray
    delay_median: np.ndarray
    delay_std: np.ndarray
    loss: np.ndarray


@dataclass(frozen=True)
class NewestMinute:
    """Each link's newest minute with a histogram (delay statistics, ms) and newest loss ratio,
    with the empirical filter's verdict on them (NaN where a link has none)."""

    delay_mean: np.ndarray
    delay_std: np.ndarray
    delay_median: np.ndarray
    loss: np.ndarray
    filter_congested: np.ndarray


@dataclass(frozen=True)
class AllTimeStats:
    """Per-link all-time statistics of the minute delay (mean series, ms) and loss ratio."""

    delay_mean: np.ndarray
    delay_std: np.ndarray
    delay_min: np.ndarray
    loss_mean: np.ndarray
    loss_std: np.ndarray

    def as_columns(self) -> np.ndarray:
        return np.column_stack([getattr(self, name) for name in ALL_TIME_NAMES])


def moving_average(values: np.ndarray, points: int = SMOOTHING_POINTS) -> np.ndarray:
    """Trailing `points`-minute mean of each row over the minutes present (NaN if none).

    Output column j averages input columns j .. j+points-1, so it has width - points + 1 columns.
    Window sums and counts are two matrix products with a band of ones (BLAS), several times
    faster than running sums along the short rows.

    >>> moving_average(np.array([[1., 2., np.nan, 4.]]), points=2).tolist()
    [[1.5, 2.0, 4.0]]
    """
    valid = ~np.isnan(values)
    band = _window_band(values.shape[1], points)
    sums = np.where(valid, values, 0.0) @ band
    counts = valid.astype(np.float64) @ band
    averages: np.ndarray = np.divide(
        sums, counts, out=np.full(sums.shape, np.nan), where=counts > 0
    )
    return averages


@lru_cache(maxsize=8)
def _window_band(width: int, points: int) -> np.ndarray:
    """(width x windows) matrix whose column j is 1 on rows j .. j+points-1."""
    rows = np.arange(width)[:, None]
    first = np.arange(width - points + 1)[None, :]
    band = ((rows >= first) & (rows < first + points)).astype(np.float64)
    band.flags.writeable = False
    return band


def compute_features(
    windows: LinkWindows, all_time: AllTimeStats, newest: NewestMinute
) -> np.ndarray:
    """The (links x 50) feature matrix in FEATURE_NAMES order; NaN where data is insufficient."""
    return np.hstack(
        [compute_history_features(windows, all_time), compute_newest_features(newest, all_time)]
    )


def compute_newest_features(newest: NewestMinute, all_time: AllTimeStats) -> np.ndarray:
    """The (links x 5) newest-minute columns in NEWEST_FEATURE_NAMES order.

    >>> newest = NewestMinute(*(np.array([v]) for v in (12.5, 0.75, 11.25, 0.01, 1.0)))
    >>> stats = AllTimeStats(*(np.array([v]) for v in (11.0, 0.5, 10.5, 0.0, 0.0)))
    >>> compute_newest_features(newest, stats).tolist()
    [[2.0, 0.75, 1.25, 0.01, 1.0]]
    """
    return np.column_stack(
        [
            newest.delay_mean - all_time.delay_min,
            newest.delay_std,
            newest.delay_mean - newest.delay_median,
            newest.loss,
            newest.filter_congested.astype(np.float64),
        ]
    )


def compute_history_features(windows: LinkWindows, all_time: AllTimeStats) -> np.ndarray:
    """netTel's (links x 45) columns in HISTORY_FEATURE_NAMES order."""
    delay = moving_average(windows.delay_mean)[:, -HISTORY_POINTS:]
    loss = moving_average(windows.loss)[:, -HISTORY_POINTS:]
    current = np.column_stack(
        [
            delay[:, -1],
            moving_average(windows.delay_median[:, -SMOOTHING_POINTS:])[:, -1],
            moving_average(windows.delay_std[:, -SMOOTHING_POINTS:])[:, -1],
            loss[:, -1],
            delay[:, -1] - delay[:, -2],
            loss[:, -1] - loss[:, -2],
        ]
    )
    history = np.column_stack(
        [delay.mean(axis=1), delay.std(axis=1), loss.mean(axis=1), loss.std(axis=1)]
    )
    return np.hstack([current, all_time.as_columns(), delay, loss, history])


def complete_rows(features: np.ndarray) -> np.ndarray:
    """Boolean mask of links whose feature row has no missing value."""
    complete: np.ndarray = ~np.isnan(features).any(axis=1)
    return complete
