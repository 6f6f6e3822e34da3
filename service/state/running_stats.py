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


def add_value(n: float, mean: float, m2: float, x: float) -> tuple[float, float, float]:
    """Welford's update of (count, mean, m2) with one value."""
    n += 1.0
    delta = x - mean if n > 1 else x
    mean = mean + delta / n if n > 1 else x
    m2 += delta * (x - mean) if n > 1 else 0.0
    return n, mean, m2
