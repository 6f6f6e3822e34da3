"""Numerically stable running statistics (Welford / Chan), scalar and vectorised."""

from __future__ import annotations

import numpy as np


def merge_moments(
    n_a: np.ndarray,
    mean_a: np.ndarray,
    m2_a: np.ndarray,
    n_b: np.ndarray,
    mean_b: np.ndarray,
    m2_b: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Combine (count, mean, sum of squared deviations) of two disjoint samples (Chan et al.).

    Empty samples must have mean 0 (as both producers here guarantee).

    >>> n, mean, m2 = merge_moments(np.array([2.]), np.array([1.]), np.array([2.]),
    ...                             np.array([2.]), np.array([5.]), np.array([2.]))
    >>> n.item(), mean.item(), m2.item()   # sample [0, 2, 4, 6]
    (4.0, 3.0, 20.0)
    """
    n = n_a + n_b
    share_b = np.divide(n_b, n, out=np.zeros_like(n), where=n > 0)
    delta = mean_b - mean_a
    return n, mean_a + delta * share_b, m2_a + m2_b + delta**2 * n_a * share_b


def window_moments(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row (count, mean, m2) of `values` (rows x slots), NaN ignored; mean 0 for empty rows."""
    valid = ~np.isnan(values)
    n = valid.sum(axis=1).astype(np.float64)
    total = np.where(valid, values, 0.0).sum(axis=1, dtype=np.float64)
    mean = np.divide(total, n, out=np.zeros_like(n), where=n > 0)
    deviations = np.where(valid, values - mean[:, None], 0.0)
    return n, mean, (deviations**2).sum(axis=1)


def add_values(
    n: np.ndarray, mean: np.ndarray, m2: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Welford's update of each (count, mean, m2) with one value of `x`.

    >>> n, mean, m2 = add_values(np.array([0., 2.]), np.array([0., 1.]), np.array([0., 2.]),
    ...                          np.array([3., 4.]))
    >>> n.tolist(), mean.tolist(), m2.tolist()   # samples [3] and [0, 2, 4]
    ([1.0, 3.0], [3.0, 2.0], [0.0, 8.0])
    """
    n = n + 1.0
    first = n <= 1
    delta = np.where(first, x, x - mean)
    mean = np.where(first, x, mean + delta / n)
    return n, mean, m2 + np.where(first, 0.0, delta * (x - mean))
