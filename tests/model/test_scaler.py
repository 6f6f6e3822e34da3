"""The min-max scaler: clipped bounds from quantiles, JSON round trip, bundles without the key."""

from __future__ import annotations

import json

import numpy as np
import pytest

from service.model.scaler import CLIP_TAIL, MinMaxScaler

NAMES = ("delay_mean_smoothed", "newest_loss")


def rows() -> np.ndarray:
    rng = np.random.default_rng(4)
    return np.column_stack([rng.uniform(1, 150, 5000), rng.exponential(0.002, 5000)])


def test_clipped_bounds_are_the_training_quantiles_and_values_stay_in_0_1() -> None:
    scaler = MinMaxScaler.fit_clipped(rows(), NAMES)
    np.testing.assert_array_equal(scaler.minimum, np.quantile(rows(), CLIP_TAIL, axis=0))
    np.testing.assert_array_equal(scaler.maximum, np.quantile(rows(), 1 - CLIP_TAIL, axis=0))
    scaled = scaler.transform(np.vstack([rows(), [[1e6, 1.0]], [[-1e6, -1.0]]]))
    assert scaled.min() == 0.0 and scaled.max() == 1.0
    assert scaled[-2].tolist() == [1.0, 1.0] and scaled[-1].tolist() == [0.0, 0.0]


def test_json_round_trips_and_a_scaler_without_the_key_is_unclipped() -> None:
    clipped = MinMaxScaler.fit_clipped(rows(), NAMES)
    loaded = MinMaxScaler.from_json(json.loads(json.dumps(clipped.to_json())))
    assert loaded.clip
    np.testing.assert_array_equal(loaded.transform(rows()), clipped.transform(rows()))
    plain = MinMaxScaler(NAMES, rows().min(axis=0), rows().max(axis=0))
    earlier = {k: v for k, v in plain.to_json().items() if k != "clip"}
    assert not MinMaxScaler.from_json(earlier).clip  # bundles shipped before clipping
    with pytest.raises(ValueError, match="clip must be true or false"):
        MinMaxScaler.from_json({**clipped.to_json(), "clip": "yes"})
