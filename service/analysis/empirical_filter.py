"""netTel's empirical delay-and-loss filter, for all links at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Below this loss ratio a minute is never congested.
LOSS_THRESHOLD = 1e-4


@dataclass(frozen=True)
class FilterResult:
    congested: np.ndarray
    score: np.ndarray


def apply_empirical_filter(
    delay_ms: np.ndarray, loss: np.ndarray, delay_min_ms: np.ndarray, delay_std_ms: np.ndarray
) -> FilterResult:
    """Congested unless loss < 1e-4 or delay < all-time min + 1 std; then score |loss x delay|.

    Links with a missing input are not congested and score 0.

    >>> r = apply_empirical_filter(np.array([30., 30., 11.]), np.array([0.05, 0.00005, 0.05]),
    ...                            np.array([10., 10., 10.]), np.array([2., 2., 2.]))
    >>> r.congested.tolist(), r.score.tolist()
    ([True, False, False], [1.5, 0.0, 0.0])
    """
    with np.errstate(invalid="ignore"):
        quiet = (loss < LOSS_THRESHOLD) | (delay_ms < delay_min_ms + delay_std_ms)
    known = ~(np.isnan(delay_ms) | np.isnan(loss) | np.isnan(delay_min_ms) | np.isnan(delay_std_ms))
    congested = known & ~quiet
    return FilterResult(congested, np.where(congested, np.abs(loss * delay_ms), 0.0))
