"""A model's calibration: its raw utilisation estimate -> congestion probability and interval.

Both maps are fitted by `nettel train` on calibration links the network never saw and stored in
the bundle as JSON (`calibration.json`, never pickled); serving and `nettel evaluate` both call
`calibrated_estimates`, so a served probability is the evaluated one.

- `congestion_probability` = P(utilisation > 0.7 | estimate): an isotonic (non-decreasing)
  regression of "above 70 %" on the estimate, applied as linear interpolation between its knots
  (constant beyond the first and last knot).
- `utilisation_low` / `utilisation_high`: a split-conformal interval for the label from the
  held-out absolute residuals |label - estimate|, one half-width per bin of the estimate
  (Mondrian conformal), clipped to [0, 1]. It covers the label with probability `coverage` on
  links like the calibration links.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

CALIBRATION_KIND = "isotonic-probability+conformal-interval"


@dataclass(frozen=True)
class Calibration:
    """Isotonic knots (`probability_x` ascending, `probability_y` non-decreasing in [0, 1]) and
    conformal half-widths per estimate bin (`interval_edges` ascending, one more than widths)."""

    probability_x: np.ndarray
    probability_y: np.ndarray
    interval_edges: np.ndarray
    interval_half_width: np.ndarray
    coverage: float
    event: str = "utilisation ratio > 0.7"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": CALIBRATION_KIND,
            "event": self.event,
            "probability": {"x": self.probability_x.tolist(), "y": self.probability_y.tolist()},
            "interval": {
                "coverage": self.coverage,
                "edges": self.interval_edges.tolist(),
                "half_width": self.interval_half_width.tolist(),
            },
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Calibration:
        """Parse and check a calibration document; ValueError names what is wrong."""
        if not isinstance(document, dict) or document.get("kind") != CALIBRATION_KIND:
            raise ValueError(f"calibration JSON is not of kind {CALIBRATION_KIND!r}")
        try:
            x = _finite(document["probability"]["x"], "probability x")
            y = _finite(document["probability"]["y"], "probability y")
            edges = _finite(document["interval"]["edges"], "interval edges")
            widths = _finite(document["interval"]["half_width"], "interval half widths")
            coverage = float(document["interval"]["coverage"])
            event = str(document.get("event", "utilisation ratio > 0.7"))
        except (KeyError, TypeError) as error:
            raise ValueError(f"calibration JSON lacks {error}") from None
        problem = _problem(x, y, edges, widths, coverage)
        if problem:
            raise ValueError(f"calibration JSON: {problem}")
        return cls(x, y, edges, widths, coverage, event)


def calibrated_estimates(
    estimate: np.ndarray, calibration: Calibration | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(congestion probability, interval low, interval high) of each raw estimate; NaN where the
    estimate is NaN or there is no calibration.

    >>> c = Calibration(np.array([0.0, 0.5, 1.0]), np.array([0.0, 0.2, 1.0]),
    ...                 np.array([0.0, 0.5, 1.0]), np.array([0.1, 0.3]), 0.9)
    >>> [a.round(12).tolist() for a in calibrated_estimates(np.array([0.25, 0.75, np.nan]), c)]
    [[0.1, 0.6, nan], [0.15, 0.45, nan], [0.35, 1.0, nan]]
    """
    values = np.asarray(estimate, dtype=np.float64)
    if calibration is None:
        missing = np.full(values.shape, np.nan)
        return missing, missing.copy(), missing.copy()
    present = ~np.isnan(values)
    probability = np.full(values.shape, np.nan)
    probability[present] = np.interp(
        values[present], calibration.probability_x, calibration.probability_y
    )
    edges, widths = calibration.interval_edges, calibration.interval_half_width
    bins = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(widths) - 1)
    half = np.where(present, widths[bins], np.nan)
    low: np.ndarray = np.clip(values - half, 0.0, 1.0)
    high: np.ndarray = np.clip(values + half, 0.0, 1.0)
    return probability, low, high


def _finite(values: Any, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or not len(array) or not np.isfinite(array).all():
        raise ValueError(f"calibration JSON: {what} must be a non-empty list of finite numbers")
    return array


def _problem(
    x: np.ndarray, y: np.ndarray, edges: np.ndarray, widths: np.ndarray, coverage: float
) -> str | None:
    if len(x) != len(y):
        return "probability x and y differ in length"
    if np.any(np.diff(x) <= 0) or np.any(np.diff(y) < 0):
        return "probability knots must increase (x strictly) and not decrease (y)"
    if y.min() < 0 or y.max() > 1:
        return "probabilities must lie in [0, 1]"
    if len(edges) != len(widths) + 1 or np.any(np.diff(edges) <= 0):
        return "interval edges must increase and number one more than the half widths"
    if widths.min() < 0 or not 0 < coverage < 1:
        return "interval half widths must be >= 0 and the coverage in (0, 1)"
    return None
