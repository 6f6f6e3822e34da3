"""Feature scalers, stored as JSON next to the model (never pickled).

`SignedLogScaler` (bundles from the newest-minute features on) standardises the signed log of
each feature; `MinMaxScaler` (netTel's, and the bundles before) maps the training range to
[0, 1]. `scaler_from_json` reads either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Loss ratios are multiplied by this before the log, so that the range where congestion shows
#: (1e-4: one probe in 10,000, to a few %) spreads over the log's curved part, not its flat start.
LOSS_MULTIPLIER = 1000.0


@dataclass(frozen=True)
class MinMaxScaler:
    """Maps each feature linearly so the training data spans [0, 1]; constant features map to 0."""

    feature_names: tuple[str, ...]
    minimum: np.ndarray
    maximum: np.ndarray

    @classmethod
    def fit(cls, rows: np.ndarray, feature_names: tuple[str, ...]) -> MinMaxScaler:
        if rows.ndim != 2 or rows.shape[1] != len(feature_names) or not len(rows):
            raise ValueError("scaler needs a non-empty (rows x features) array matching the names")
        return cls(tuple(feature_names), rows.min(axis=0), rows.max(axis=0))

    def transform(self, rows: np.ndarray) -> np.ndarray:
        """Scaled rows (float32). Values outside the training range extrapolate linearly.

        >>> s = MinMaxScaler(("a", "b"), np.array([0., 5.]), np.array([10., 5.]))
        >>> s.transform(np.array([[5., 5.], [20., 7.]])).tolist()
        [[0.5, 0.0], [2.0, 2.0]]
        """
        span = self.maximum - self.minimum
        safe_span = np.where(span > 0, span, 1.0)
        scaled: np.ndarray = ((rows - self.minimum) / safe_span).astype(np.float32)
        return scaled

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "minmax",
            "feature_names": list(self.feature_names),
            "min": self.minimum.tolist(),
            "max": self.maximum.tolist(),
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> MinMaxScaler:
        names = tuple(document["feature_names"])
        minimum = np.asarray(document["min"], dtype=np.float64)
        maximum = np.asarray(document["max"], dtype=np.float64)
        if document.get("kind") != "minmax" or not (len(names) == len(minimum) == len(maximum)):
            raise ValueError("scaler JSON is not a min-max scaler over its feature names")
        if not (np.isfinite(minimum).all() and np.isfinite(maximum).all()):
            raise ValueError("scaler JSON holds non-finite bounds")
        return cls(names, minimum, maximum)


def signed_log(values: np.ndarray) -> np.ndarray:
    """sign(x) log(1 + |x|): the identity near 0, logarithmic in both tails.

    >>> signed_log(np.array([-(np.e - 1), 0.0, np.e**2 - 1])).round(12).tolist()
    [-1.0, 0.0, 2.0]
    """
    logged: np.ndarray = np.sign(values) * np.log1p(np.abs(values))
    return logged


def feature_multipliers(feature_names: tuple[str, ...]) -> np.ndarray:
    """LOSS_MULTIPLIER for loss features (their names say "loss"), 1 for the others."""
    return np.array([LOSS_MULTIPLIER if "loss" in name else 1.0 for name in feature_names])


@dataclass(frozen=True)
class SignedLogScaler:
    """Standardises the signed log of each feature (loss ratios scaled by LOSS_MULTIPLIER first).

    Delays span 1-150 ms of propagation plus queues of a few to 100 ms, losses 0 to 1 with
    congestion showing from 1e-4: min-max scaling squeezes most rows into a sliver of [0, 1] and
    extrapolates linearly far past the training range on links whose physics differ, where the
    network was then confidently wrong. The log compresses both tails; a link twice as far from
    anything seen is one step further, not twice as far.
    """

    feature_names: tuple[str, ...]
    multiplier: np.ndarray
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, rows: np.ndarray, feature_names: tuple[str, ...]) -> SignedLogScaler:
        if rows.ndim != 2 or rows.shape[1] != len(feature_names) or not len(rows):
            raise ValueError("scaler needs a non-empty (rows x features) array matching the names")
        multiplier = feature_multipliers(feature_names)
        logged = signed_log(rows.astype(np.float64) * multiplier)
        return cls(tuple(feature_names), multiplier, logged.mean(axis=0), logged.std(axis=0))

    @classmethod
    def from_sums(
        cls, feature_names: tuple[str, ...], count: int, total: np.ndarray, squares: np.ndarray
    ) -> SignedLogScaler:
        """From the count, sum and sum of squares of the rows' `signed_log(rows x multipliers)`,
        gathered in batches."""
        if count < 1:
            raise ValueError("no training rows")
        mean = total / count
        std = np.sqrt(np.maximum(squares / count - mean**2, 0.0))
        return cls(tuple(feature_names), feature_multipliers(feature_names), mean, std)

    def transform(self, rows: np.ndarray) -> np.ndarray:
        """Scaled rows (float32); a constant feature maps to 0.

        >>> s = SignedLogScaler(("delay", "loss"), np.array([1.0, 1000.0]), np.array([1.0, 0.0]),
        ...                     np.array([0.5, 0.0]))
        >>> s.transform(np.array([[np.e - 1, 0.002]])).astype(float).round(6).tolist()
        [[0.0, 1.098612]]
        """
        safe_std = np.where(self.std > 0, self.std, 1.0)
        logged = signed_log(np.asarray(rows, dtype=np.float64) * self.multiplier)
        scaled: np.ndarray = ((logged - self.mean) / safe_std).astype(np.float32)
        return scaled

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "signed-log-standard",
            "feature_names": list(self.feature_names),
            "multiplier": self.multiplier.tolist(),
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> SignedLogScaler:
        names = tuple(document["feature_names"])
        arrays = [np.asarray(document[key], np.float64) for key in ("multiplier", "mean", "std")]
        kind_ok = document.get("kind") == "signed-log-standard"
        if not kind_ok or any(len(a) != len(names) for a in arrays):
            raise ValueError("scaler JSON is not a signed-log scaler over its feature names")
        if not all(np.isfinite(a).all() for a in arrays) or (arrays[2] < 0).any():
            raise ValueError("scaler JSON holds non-finite values or a negative std")
        return cls(names, *arrays)


Scaler = MinMaxScaler | SignedLogScaler


def scaler_from_json(document: dict[str, Any]) -> Scaler:
    """The scaler a bundle's scaler.json describes (by its `kind`)."""
    if document.get("kind") == "signed-log-standard":
        return SignedLogScaler.from_json(document)
    return MinMaxScaler.from_json(document)
