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


def test_log_inputs_are_log10_of_x_plus_offset_before_the_bounds() -> None:
    # offset 1: log10 of 1, 10, 100, 1000 is 0, 1, 2, 3; negatives read as 0; "b" stays linear
    rows = np.array([[0.0, 2.0], [9.0, 4.0], [99.0, 6.0], [999.0, 10.0]])
    scaler = MinMaxScaler.fit_clipped(rows, ("a", "b"), tail=0.0, log_offsets={"a": 1.0})
    assert scaler.minimum.tolist() == [0.0, 2.0] and scaler.maximum.tolist() == [3.0, 10.0]
    scaled = scaler.transform(np.array([[-5.0, 2.0], [9.0, 6.0], [99.0, 8.0], [1e6, 12.0]]))
    expected = np.array([[0, 0], [1 / 3, 0.5], [2 / 3, 0.75], [1, 1]], dtype=np.float32)
    np.testing.assert_array_equal(scaled, expected)
    # a loss of one probe in 600 against 1e-4 .. 1 reads 0.31 of the range, not 0.0017
    loss = MinMaxScaler(
        ("newest_loss",), np.array([-4.0]), np.array([0.0]), True, {"newest_loss": 1e-4}
    )
    np.testing.assert_allclose(loss.transform(np.array([[1 / 600]])), [[0.3118]], atol=1e-4)


def test_a_log_scaler_round_trips_through_json_bit_for_bit() -> None:
    """What training fits is what serving reads back from scaler.json."""
    fitted = MinMaxScaler.fit_clipped(rows(), NAMES, log_offsets={"newest_loss": 1e-4})
    document = json.loads(json.dumps(fitted.to_json()))
    assert document["transforms"] == {"newest_loss": {"kind": "log10", "offset": 1e-4}}
    loaded = MinMaxScaler.from_json(document)
    assert loaded.log_offsets == {"newest_loss": 1e-4}
    np.testing.assert_array_equal(loaded.transform(rows()), fitted.transform(rows()))
    np.testing.assert_array_equal(loaded.minimum, fitted.minimum)


def test_a_scaler_file_without_transforms_reads_every_input_linearly() -> None:
    document = {
        "kind": "minmax",
        "feature_names": list(NAMES),
        "min": [0.0, 0.0],
        "max": [100.0, 0.5],
        "clip": True,
    }
    scaler = MinMaxScaler.from_json(document)
    assert scaler.log_offsets == {} and "transforms" not in scaler.to_json()
    scaled = scaler.transform(np.array([[25.0, 0.01], [150.0, 0.25]]))
    np.testing.assert_array_equal(scaled, np.array([[0.25, 0.02], [1.0, 0.5]], dtype=np.float32))


@pytest.mark.parametrize(
    ("transforms", "message"),
    [
        ({"newest_loss": {"kind": "sqrt"}}, "unknown transform 'sqrt' of newest_loss"),
        ({"newest_loss": "log10"}, "unknown transform None of newest_loss"),
        ({"newest_loss": {"kind": "log10"}}, "offset of newest_loss must be a number"),
        ({"newest_loss": {"kind": "log10", "offset": 0}}, "finite and positive"),
        ({"delay_p99": {"kind": "log10", "offset": 1}}, r"does not have: \['delay_p99'\]"),
        (["log10"], "must map input names"),
    ],
)
def test_a_scaler_file_with_a_transform_this_version_does_not_know_is_refused(
    transforms: object, message: str
) -> None:
    document = {**MinMaxScaler.fit_clipped(rows(), NAMES).to_json(), "transforms": transforms}
    with pytest.raises(ValueError, match=message):
        MinMaxScaler.from_json(document)
