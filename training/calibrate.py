"""Fits a model's calibration on links it never saw, and measures how well calibrated it is.

`fit_calibration` turns (raw estimate, true utilisation, label) rows of the calibration links
into a `service.analysis.calibration.Calibration`: isotonic regression (pool adjacent violators,
scikit-learn) of "utilisation > 0.7" on the estimate, and split-conformal half-widths of the
interval per estimate bin. Applying it is `calibrated_estimates`, the function serving calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.isotonic import IsotonicRegression

from service.analysis.calibration import Calibration, calibrated_estimates
from training.dataset import is_congested

#: Estimate bins of the conformal interval (Mondrian: one half-width per bin).
INTERVAL_EDGES = (0.0, 0.05, 0.2, 0.5, 0.7, 0.85, 1.0)
INTERVAL_COVERAGE = 0.9
#: A bin with fewer calibration rows takes the half-width of all rows.
MIN_BIN_ROWS = 50
RELIABILITY_BINS = 10


def fit_calibration(
    estimate: np.ndarray,
    utilisation: np.ndarray,
    label: np.ndarray,
    coverage: float = INTERVAL_COVERAGE,
) -> Calibration:
    """Isotonic P(utilisation > 0.7 | estimate) and conformal half-widths for the label.

    >>> c = fit_calibration(np.array([0.1, 0.2, 0.3, 0.9]), np.array([0.1, 0.8, 0.2, 0.9]),
    ...                     np.array([0.0, 0.8, 0.0, 0.9]))
    >>> c.probability_x.tolist(), c.probability_y.tolist()
    ([0.1, 0.2, 0.3, 0.9], [0.0, 0.5, 0.5, 1.0])
    """
    estimate = np.asarray(estimate, dtype=np.float64)
    above = is_congested(utilisation).astype(np.float64)
    if len(estimate) == 0:
        raise ValueError("calibration needs rows of links the network was not trained on")
    isotonic = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(estimate, above)
    x, y = _knots(isotonic.X_thresholds_, isotonic.y_thresholds_)
    edges = np.asarray(INTERVAL_EDGES)
    widths = conformal_half_widths(estimate, np.asarray(label, np.float64), edges, coverage)
    return Calibration(x, y, edges, widths, coverage)


def _knots(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Isotonic thresholds with strictly increasing x (one estimate gives one knot: a lone
    knot is doubled so interpolation is defined)."""
    x, keep = np.unique(np.asarray(x, np.float64), return_index=True)
    y = np.asarray(y, np.float64)[keep]
    if len(x) == 1:
        x, y = np.array([x[0], x[0] + 1e-9]), np.array([y[0], y[0]])
    return x, np.maximum.accumulate(np.clip(y, 0.0, 1.0))


def conformal_half_widths(
    estimate: np.ndarray, label: np.ndarray, edges: np.ndarray, coverage: float
) -> np.ndarray:
    """Per estimate bin, the ceil((n + 1) coverage)-th smallest |label - estimate| of its n rows
    (split conformal: the interval covers a new row of the bin with probability >= coverage).

    >>> conformal_half_widths(np.zeros(9), np.arange(9) / 10, np.array([0.0, 1.0]), 0.8).tolist()
    [0.7]
    """
    residual = np.abs(label - estimate)
    bins = np.clip(np.searchsorted(edges, estimate, side="right") - 1, 0, len(edges) - 2)
    overall = _conformal_quantile(residual, coverage)
    widths = []
    for b in range(len(edges) - 1):
        rows = residual[bins == b]
        widths.append(_conformal_quantile(rows, coverage) if len(rows) >= MIN_BIN_ROWS else overall)
    return np.asarray(widths)


def _conformal_quantile(residual: np.ndarray, coverage: float) -> float:
    n = len(residual)
    rank = min(int(np.ceil((n + 1) * coverage)), n)
    return float(np.sort(residual)[rank - 1])


def expected_calibration_error(
    probability: np.ndarray, outcome: np.ndarray, bins: int = RELIABILITY_BINS
) -> float:
    """Sum over equal-width probability bins of (rows in bin / rows) x |mean p - observed rate|.

    >>> expected_calibration_error(np.array([0.1, 0.1, 0.9, 0.9]), np.array([0, 1, 1, 1]))
    0.25
    """
    table = reliability_table(probability, outcome, bins)
    weight = np.asarray(table["rows"]) / max(len(probability), 1)
    gap = np.abs(np.asarray(table["mean_probability"]) - np.asarray(table["observed"]))
    return float(np.sum(weight * gap))


def reliability_table(
    probability: np.ndarray, outcome: np.ndarray, bins: int = RELIABILITY_BINS
) -> dict[str, list[float]]:
    """Per non-empty equal-width bin: rows, mean predicted probability, observed event rate."""
    probability = np.asarray(probability, np.float64)
    index = np.minimum((probability * bins).astype(int), bins - 1)
    rows = np.bincount(index, minlength=bins)
    used = rows > 0
    mean = np.bincount(index, weights=probability, minlength=bins)[used] / rows[used]
    observed = np.bincount(index, weights=np.asarray(outcome, float), minlength=bins)
    return {
        "bin_low": (np.flatnonzero(used) / bins).tolist(),
        "rows": rows[used].tolist(),
        "mean_probability": mean.tolist(),
        "observed": (observed[used] / rows[used]).tolist(),
    }


@dataclass(frozen=True)
class CalibrationScores:
    """The calibrated outputs on some rows and how well they match the truth."""

    probability: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def metrics(self, utilisation: np.ndarray, label: np.ndarray) -> dict[str, Any]:
        above = is_congested(utilisation)
        covered = (label >= self.low - 1e-9) & (label <= self.high + 1e-9)
        return {
            "expected_calibration_error": expected_calibration_error(self.probability, above),
            "brier": float(np.mean((self.probability - above) ** 2)),
            "interval_coverage": float(np.mean(covered)),
            "interval_mean_width": float(np.mean(self.high - self.low)),
            "reliability": reliability_table(self.probability, above),
        }


def calibration_scores(estimate: np.ndarray, calibration: Calibration) -> CalibrationScores:
    """Probability and interval of each estimate, through the serving function."""
    return CalibrationScores(*calibrated_estimates(estimate, calibration))
