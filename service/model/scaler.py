"""Min-max feature scaler, stored as JSON next to the model (never pickled).

Bundles from the newest-minute features on clip: their bounds are the training rows' 0.1 % and
99.9 % quantiles and scaled values stay in [0, 1], so a link beyond anything seen in training is
read as the most extreme link seen, not extrapolated linearly (as boosted trees do). Unclipped,
the network was confidently wrong on queue physics it had not seen: trained on simulator family A
alone it ranked family B's busy minutes at ROC AUC 0.79-0.82; clipped at 0.90 (docs/model.md).

An input may first pass through `log10(max(x, 0) + offset)` (`log_offsets`, JSON `transforms`):
loss and delays span orders of magnitude (one lost probe of 600 is 1.7e-3, a policer drops 1-10 %,
a dead link 100 %), and linear bounds squeeze every realistic loss into the bottom percent of the
range, where a ReLU network cannot tell their sizes apart. Scaler files without `transforms`
(bundles before it) read every input linearly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Share of the training rows below the lower bound (and above the upper) of a clipped scaler.
CLIP_TAIL = 0.001
#: The one per-input transform a scaler file may name (besides none).
LOG10 = "log10"


@dataclass(frozen=True)
class MinMaxScaler:
    """Maps each feature linearly so the training data spans [0, 1]; constant features map to 0.
    With `clip`, values beyond the bounds map to 0 or 1. Inputs named in `log_offsets` are
    replaced by log10(max(x, 0) + offset) first; the bounds are of the transformed values."""

    feature_names: tuple[str, ...]
    minimum: np.ndarray
    maximum: np.ndarray
    clip: bool = False
    log_offsets: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if unknown := sorted(set(self.log_offsets) - set(self.feature_names)):
            raise ValueError(f"scaler: transforms of inputs it does not have: {unknown}")
        if not all(math.isfinite(o) and o > 0 for o in self.log_offsets.values()):
            raise ValueError("scaler: log10 offsets must be finite and positive")

    @classmethod
    def fit_clipped(
        cls,
        rows: np.ndarray,
        feature_names: tuple[str, ...],
        tail: float = CLIP_TAIL,
        log_offsets: Mapping[str, float] | None = None,
    ) -> MinMaxScaler:
        """Clipped, between the (transformed) rows' `tail` and 1 - `tail` quantiles.

        >>> s = MinMaxScaler.fit_clipped(np.arange(1001.0)[:, None], ("a",), tail=0.01)
        >>> s.minimum.tolist(), s.maximum.tolist()
        ([10.0], [990.0])
        >>> s.transform(np.array([[-5.0], [500.0], [2000.0]])).tolist()
        [[0.0], [0.5], [1.0]]
        """
        if rows.ndim != 2 or rows.shape[1] != len(feature_names) or not len(rows):
            raise ValueError("scaler needs a non-empty (rows x features) array matching the names")
        offsets = dict(log_offsets or {})
        transformed = _log_columns(rows, _offset_row(feature_names, offsets))
        low, high = np.quantile(transformed, [tail, 1.0 - tail], axis=0)
        return cls(tuple(feature_names), low, high, clip=True, log_offsets=offsets)

    def transform(self, rows: np.ndarray) -> np.ndarray:
        """Scaled rows (float32). Unclipped, values outside the bounds extrapolate linearly.

        >>> s = MinMaxScaler(("a", "b"), np.array([0., 5.]), np.array([10., 5.]))
        >>> s.transform(np.array([[5., 5.], [20., 7.]])).tolist()
        [[0.5, 0.0], [2.0, 2.0]]
        >>> MinMaxScaler(("a",), np.array([0.]), np.array([10.]), clip=True).transform(
        ...     np.array([[-3.], [20.]])).tolist()
        [[0.0], [1.0]]
        >>> MinMaxScaler(("a",), np.array([-4.]), np.array([0.]), True, {"a": 1e-4}).transform(
        ...     np.array([[0.0], [0.0099], [2.0]])).tolist()
        [[0.0], [0.5], [1.0]]
        """
        values = _log_columns(rows, _offset_row(self.feature_names, self.log_offsets))
        span = self.maximum - self.minimum
        safe_span = np.where(span > 0, span, 1.0)
        scaled: np.ndarray = ((values - self.minimum) / safe_span).astype(np.float32)
        if self.clip:
            np.clip(scaled, 0.0, 1.0, out=scaled)
        return scaled

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "kind": "minmax",
            "feature_names": list(self.feature_names),
            "min": self.minimum.tolist(),
            "max": self.maximum.tolist(),
            "clip": self.clip,
        }
        if self.log_offsets:
            document["transforms"] = {
                name: {"kind": LOG10, "offset": offset} for name, offset in self.log_offsets.items()
            }
        return document

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
        offsets = _read_transforms(document.get("transforms", {}))  # none before transforms
        return cls(names, minimum, maximum, clip, offsets)


def _read_transforms(transforms: Any) -> dict[str, float]:
    """`{name: {"kind": "log10", "offset": x}}` -> `{name: x}`; any other kind is refused."""
    if not isinstance(transforms, dict):
        raise ValueError("scaler JSON: transforms must map input names to transforms")
    offsets = {}
    for name, entry in transforms.items():
        kind = entry.get("kind") if isinstance(entry, dict) else None
        if kind != LOG10:
            raise ValueError(
                f"scaler JSON: unknown transform {kind!r} of {name} (this version knows {LOG10!r} "
                "only); retrain with this version or use a newer one"
            )
        offset = entry.get("offset")
        if isinstance(offset, bool) or not isinstance(offset, int | float):
            raise ValueError(f"scaler JSON: the {LOG10} offset of {name} must be a number")
        offsets[name] = float(offset)
    return offsets


def _offset_row(names: tuple[str, ...], offsets: Mapping[str, float]) -> np.ndarray:
    """Each column's log10 offset, NaN for the columns read linearly."""
    return np.array([offsets.get(name, np.nan) for name in names], dtype=np.float64)


def _log_columns(rows: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """`rows` with log10(max(x, 0) + offset) in the columns whose offset is not NaN."""
    logged = ~np.isnan(offsets)
    if not logged.any():
        return rows
    values = np.array(rows, dtype=np.float64)
    values[:, logged] = np.log10(np.maximum(values[:, logged], 0.0) + offsets[logged])
    return values
