"""Feature scalers: the signed-log scaler's exact values, its JSON round trip and refusals, and
that streamed sums give the scaler fitted in memory."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.scaler import (
    LOSS_MULTIPLIER,
    MinMaxScaler,
    SignedLogScaler,
    scaler_from_json,
    signed_log,
)

NAMES = ("delay_mean_smoothed", "newest_loss", "delay_gradient")


def rows() -> np.ndarray:
    rng = np.random.default_rng(4)
    return np.column_stack(
        [rng.uniform(1, 150, 200), rng.exponential(0.002, 200), rng.normal(0, 3, 200)]
    )


def test_loss_features_are_multiplied_before_the_log_and_the_rest_standardised() -> None:
    scaler = SignedLogScaler.fit(rows(), NAMES)
    assert scaler.multiplier.tolist() == [1.0, LOSS_MULTIPLIER, 1.0]
    scaled = scaler.transform(rows())
    np.testing.assert_allclose(scaled.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(scaled.std(axis=0), 1.0, rtol=1e-5)
    logged = signed_log(rows()[:, 1] * LOSS_MULTIPLIER)
    expected = (logged - logged.mean()) / logged.std()
    np.testing.assert_allclose(scaled[:, 1], expected, rtol=1e-5)


def test_far_outside_the_training_range_grows_logarithmically_not_linearly() -> None:
    scaler = SignedLogScaler.fit(rows(), NAMES)
    far = scaler.transform(np.array([[150.0, 0.0, 0.0], [1500.0, 0.0, 0.0]]))[:, 0]
    # Ten times the largest delay seen is ln(1501/151) / std more, not 9 x 150 ms more.
    assert far[1] - far[0] == pytest.approx(np.log(1501 / 151) / scaler.std[0], rel=1e-5)


def test_streamed_sums_give_the_scaler_fitted_in_memory() -> None:
    data = rows()
    logged = signed_log(data * SignedLogScaler.fit(data, NAMES).multiplier)
    halves = np.array_split(logged, 2)
    streamed = SignedLogScaler.from_sums(
        NAMES,
        len(logged),
        sum(h.sum(axis=0) for h in halves),
        sum((h**2).sum(axis=0) for h in halves),
    )
    fitted = SignedLogScaler.fit(data, NAMES)
    np.testing.assert_allclose(streamed.mean, fitted.mean, rtol=1e-12)
    np.testing.assert_allclose(streamed.std, fitted.std, rtol=1e-9)


def test_json_round_trips_and_both_kinds_load() -> None:
    fitted = SignedLogScaler.fit(rows(), NAMES)
    loaded = scaler_from_json(json.loads(json.dumps(fitted.to_json())))
    assert isinstance(loaded, SignedLogScaler)
    np.testing.assert_array_equal(loaded.transform(rows()), fitted.transform(rows()))
    minmax = MinMaxScaler.fit(rows(), NAMES)
    assert isinstance(scaler_from_json(minmax.to_json()), MinMaxScaler)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"std": [1.0, -1.0, 1.0]}, "negative std"),
        ({"mean": [0.0, float("nan"), 0.0]}, "non-finite"),
        ({"multiplier": [1.0, 1.0]}, "not a signed-log scaler"),
    ],
)
def test_a_damaged_scaler_is_refused(change: dict, message: str) -> None:
    document = {**SignedLogScaler.fit(rows(), NAMES).to_json(), **change}
    with pytest.raises(ValueError, match=message):
        scaler_from_json(document)
