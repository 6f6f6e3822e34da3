"""Min-max feature scaler, stored as JSON next to the model (never pickled)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


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
