"""Align each link's ring-buffer slots into a time-ordered window ending at a reference minute."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WindowPositions:
    """Which slot holds each minute reference-31 .. reference of every link, and whether it does."""

    flat_index: np.ndarray
    held: np.ndarray

    def gather(self, values: np.ndarray) -> np.ndarray:
        """`values` (links x slots) reordered oldest -> newest, NaN where the minute is absent."""
        picked = values.ravel()[self.flat_index]
        return np.where(self.held, picked, np.float64(np.nan))  # float64, whatever the storage


def window_positions(slot_minute: np.ndarray, reference_minute: np.ndarray) -> WindowPositions:
    """Positions for all links at once, shared by every series of the same ring."""
    width = slot_minute.shape[1]
    expected = reference_minute[:, None] - (width - 1) + np.arange(width)
    flat_index = expected % width + np.arange(len(slot_minute))[:, None] * width
    return WindowPositions(flat_index, slot_minute.ravel()[flat_index] == expected)


def order_window(
    slot_minute: np.ndarray, values: np.ndarray, reference_minute: np.ndarray
) -> np.ndarray:
    """Rows of `values` reordered oldest -> newest for minutes reference-31 .. reference.

    Slots that do not hold the expected minute (missing, or newer than the reference) are NaN.

    >>> sm = np.array([[4, 1, 2, 3]]); v = np.array([[40., 10., 20., 30.]])
    >>> order_window(sm, v, np.array([3])).tolist()
    [[nan, 10.0, 20.0, 30.0]]
    """
    return window_positions(slot_minute, reference_minute).gather(values)
