"""Align each link's ring-buffer slots into a time-ordered window ending at a reference minute."""

from __future__ import annotations

import numpy as np


def order_window(
    slot_minute: np.ndarray, values: np.ndarray, reference_minute: np.ndarray
) -> np.ndarray:
    """Rows of `values` reordered oldest -> newest for minutes reference-31 .. reference.

    Slots that do not hold the expected minute (missing, or newer than the reference) are NaN.

    >>> sm = np.array([[4, 1, 2, 3]]); v = np.array([[40., 10., 20., 30.]])
    >>> order_window(sm, v, np.array([3])).tolist()
    [[nan, 10.0, 20.0, 30.0]]
    """
    width = values.shape[1]
    expected = reference_minute[:, None] - (width - 1) + np.arange(width)
    slots = expected % width
    held = np.take_along_axis(slot_minute, slots, axis=1)
    picked = np.take_along_axis(values, slots, axis=1).astype(np.float64)
    return np.where(held == expected, picked, np.nan)
