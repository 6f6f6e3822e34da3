"""Resample a utilisation series onto the one-value-per-minute grid of perfSONAR data.

Choice: *hold*, not linear interpolation. Router values are interval averages, so each minute
takes the value of the sample interval that covers the minute's midpoint (``60 * minute + 30``),
which is the interval overlapping that minute most. A 5-minute average therefore fills the five
minutes inside its interval with that average; interpolating would smear congestion peaks into
their neighbours.

A sample is held until the next sample when the gap between them is at most ``max_gap_s``;
across a longer gap, and after the last sample, it covers only its own ``period_s``; minutes
covered by no sample are NaN.
"""

from __future__ import annotations

import numpy as np

from training.readers.series import UtilisationSeries


def to_minutes(
    series: UtilisationSeries, start_minute: int, n_minutes: int, max_gap_s: int | None = None
) -> np.ndarray:
    """Return ``n_minutes`` float64 values for minutes ``start_minute, start_minute + 1, ...``.

    Minute ``m`` is epoch seconds ``[60 m, 60 m + 60)``. ``max_gap_s`` defaults to twice the
    series' ``period_s`` (one missing 5-minute row is bridged, two are not).

    >>> from training.readers.series import build_series
    >>> five_minute = build_series("l", "in", [(0, 0.5), (300, 0.25)], period_s=300)
    >>> to_minutes(five_minute, start_minute=0, n_minutes=11).tolist()
    [0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.25, nan]
    """
    if n_minutes < 0:
        raise ValueError(f"n_minutes must not be negative, not {n_minutes}")
    if len(series.timestamps) == 0:
        return np.full(n_minutes, np.nan)
    limit = 2 * series.period_s if max_gap_s is None else max_gap_s
    midpoints = (start_minute + np.arange(n_minutes, dtype=np.int64)) * 60 + 30
    index = np.searchsorted(series.timestamps, midpoints, side="right") - 1
    safe = np.maximum(index, 0)
    covered = (index >= 0) & (midpoints < _coverage_ends(series, limit)[safe])
    return np.where(covered, series.utilisation[safe], np.nan)


def _coverage_ends(series: UtilisationSeries, max_gap_s: int) -> np.ndarray:
    """Epoch second at which each sample stops being held (exclusive)."""
    starts = series.timestamps
    ends = starts + series.period_s
    bridged = np.diff(starts) <= max_gap_s
    ends[:-1] = np.where(bridged, starts[1:], ends[:-1])
    return ends
