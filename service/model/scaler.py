"""Min-max feature scaler, stored as JSON next to the model (never pickled).

Bundles from the newest-minute features on clip: their bounds are the training rows' 0.1 % and
99.9 % quantiles and scaled values stay in [0, 1], so a link beyond anything seen in training is
read as the most extreme link seen, not extrapolated linearly (as boosted trees do). Unclipped,
the network was confidently wrong on queue physics it had not seen: trained on simulator family A
alone it ranked family B's busy minutes at ROC AUC 0.79-0.82; clipped at 0.90 (docs/model.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Share of the training rows below the lower bound (and above the upper) of a clipped scaler.
CLIP_TAIL = 0.001


@dataclass(frozen=True)
class MinMaxScaler:
    """Maps each feature linearly so the training data spans [0, 1]; constant features map to 0.
    With `clip`, values beyond the bounds map to 0 or 1."""

    feature_names: tuple[str, ...]
    minimum: np.ndarray
    maximum: np.ndarray
    clip: bool = False

    @classmethod
    def fit_clipped(
        cls, rows: np.ndarray, feature_names: tuple[str, ...], tail: float = CLIP_TAIL
    ) -> MinMaxScaler:
        """Clipped, between the rows' `tail` and 1 - `tail` quantiles.

        >>> s = MinMaxScaler.fit_clipped(np.arange(1001.0)[:, None], ("a",), tail=0.01)
        >>> s.minimum.tolist(), s.maximum.tolist()
        ([10.0], [990.0])
        >>> s.transform(np.array([[-5.0], [500.0], [2000.0]])).tolist()
        [[0.0], [0.5], [1.0]]
        """
        if rows.ndim != 2 or rows.shape[1] != len(feature_names) or not len(rows):
            raise ValueError("scaler needs a non-empty (rows x features) array matching the names")
        low, high = np.quantile(rows, [tail, 1.0 - tail], axis=0)
        return cls(tuple(feature_names), low, high, clip=True)

    def transform(self, rows: np.ndarray) -> np.ndarray:
        """Scaled rows (float32). Unclipped, values outside the bounds extrapolate linearly.

        >>> s = MinMaxScaler(("a", "b"), np.array([0., 5.]), np.array([10., 5.]))
        >>> s.transform(np.array([[5., 5.], [20., 7.]])).tolist()
        [[0.5, 0.0], [2.0, 2.0]]
        >>> MinMaxScaler(("a",), np.array([0.]), np.array([10.]), clip=True).transform(
        ...     np.array([[-3.], [20.]])).tolist()
        [[0.0], [1.0]]
        """
        span = self.maximum - self.minimum
        safe_span = np.where(span > 0, span, 1.0)
        scaled: np.ndarray = ((rows - self.minimum) / safe_span).astype(np.float32)
        if self.clip:
            np.clip(scaled, 0.0, 1.0, out=scaled)
        return scaled

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "minmax",
            "feature_names": list(self.feature_names),
            "min": self.minimum.tolist(),
            "max": self.maximum.tolist(),
            "clip": self.clip,
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
        clip = document.get("clip", False)  # bundles before clipping have no key
        if not isinstance(clip, bool):
            raise ValueError("scaler JSON: clip must be true or false")
        return cls(names, minimum, maximum, clip)
