"""The Keras network definition: netTel's shape, within what the numpy serving path runs."""

from __future__ import annotations

import numpy as np
import pytest

from tests.training.needs_keras import skip_without_keras  # noqa: E402

skip_without_keras()
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from service.model.numpy_network import ACTIVATIONS  # noqa: E402
from training.network import (  # noqa: E402
    NetworkConfig,
    build_network,
    load_keras,
    load_tensorflow,
)


def layer_summary(config: NetworkConfig) -> list[tuple[str, object]]:
    model = build_network(45, config, seed=0)
    return [
        (layer.__class__.__name__, getattr(layer, "units", getattr(layer, "rate", None)))
        for layer in model.layers
    ]


def test_default_network_is_nettels_shape() -> None:
    assert layer_summary(NetworkConfig()) == [
        ("Dense", 100),
        ("Dropout", 0.5),
        ("Dense", 50),
        ("Dropout", 0.5),
        ("Dense", 5),
        ("Dense", 1),
    ]


def test_widths_and_dropout_are_configurable() -> None:
    summary = layer_summary(NetworkConfig(widths=(8, 4), dropout=0.0))
    assert summary == [("Dense", 8), ("Dense", 4), ("Dense", 1)]


def test_every_activation_is_one_the_numpy_path_supports() -> None:
    for output in ("linear", "sigmoid"):
        model = build_network(45, NetworkConfig(output_activation=output), seed=0)
        activations = {
            layer.activation.__name__ for layer in model.layers if hasattr(layer, "units")
        }
        assert activations <= set(ACTIVATIONS)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"widths": ()},
        {"widths": (4, 0)},
        {"dropout": 1.0},
        {"output_activation": "tanh"},
        {"optimizer": "sgd"},
        {"learning_rate": 0.0},
        {"ensemble": 0},
        {"ensemble": 17},
        {"loss": "mae"},
        {"loss": "binary_crossentropy", "output_activation": "linear"},
    ],
)
def test_invalid_configurations_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        NetworkConfig(**kwargs)


def test_the_same_seed_gives_the_same_weights() -> None:
    first = build_network(45, NetworkConfig(widths=(8, 4, 2)), seed=5).get_weights()
    second = build_network(45, NetworkConfig(widths=(8, 4, 2)), seed=5).get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_a_monotone_network_never_lowers_its_estimate_as_an_input_grows() -> None:
    from training.network import fit_network

    rng = np.random.default_rng(0)
    features = rng.random((2048, 3), dtype=np.float32)
    # a label that FALLS with input 0: an unconstrained network would follow it
    labels = (1.0 - features[:, 0]).astype(np.float32)
    model = build_network(3, NetworkConfig(widths=(8, 4), dropout=0.0, monotone=True), seed=1)
    fit_network(model, features, labels, epochs=2, verbose=0)
    kernels = [layer.kernel.numpy() for layer in model.layers if hasattr(layer, "units")]
    assert all((kernel >= 0).all() for kernel in kernels)
    grid = np.tile(np.float32(0.5), (11, 3))
    grid[:, 0] = np.linspace(0, 1, 11)
    estimates = model.predict(grid, verbose=0)[:, 0]
    assert (np.diff(estimates) >= 0).all()


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p / (1.0 - p))


def test_merged_members_average_their_logits_in_one_network_the_numpy_path_serves(
    tmp_path,
) -> None:
    from service.model.numpy_network import NumpyNetwork
    from training.network import merge_members

    config = NetworkConfig(widths=(8, 4, 2), dropout=0.3)
    members = [build_network(3, config, seed=seed) for seed in (1, 2, 3)]
    rows = np.random.default_rng(0).random((64, 3), dtype=np.float32)
    member_logits = [_logit(m.predict(rows, verbose=0)[:, 0].astype(np.float64)) for m in members]
    expected = 1.0 / (1.0 + np.exp(-np.mean(member_logits, axis=0)))

    merged = merge_members(members)
    assert [layer.units for layer in merged.layers] == [24, 12, 6, 1]
    np.testing.assert_allclose(merged.predict(rows, verbose=0)[:, 0], expected, atol=1e-5)
    merged.save(tmp_path / "merged.keras")
    served = NumpyNetwork.from_keras_file(tmp_path / "merged.keras").predict(rows)
    np.testing.assert_allclose(served.ravel(), expected, atol=1e-5)


def test_one_member_is_the_plain_network_and_members_differ_by_seed() -> None:
    from training.network import train_members

    rows = np.random.default_rng(0).random((256, 3), dtype=np.float32)
    labels = rows[:, 0]
    config = NetworkConfig(widths=(8, 4), dropout=0.0)

    def fit(model):
        from training.network import fit_network

        return fit_network(model, rows, labels, epochs=2, verbose=0)

    single, single_losses = train_members(3, config, 7, fit)
    plain = build_network(3, config, seed=7)
    fit(plain)
    assert all(
        np.array_equal(a, b) for a, b in zip(single.get_weights(), plain.get_weights(), strict=True)
    )
    merged, losses = train_members(3, NetworkConfig(widths=(8, 4), dropout=0.0, ensemble=2), 7, fit)
    assert len(losses) == 2 and len(single_losses) == 2
    first_kernel = merged.layers[0].get_weights()[0]
    assert first_kernel.shape == (3, 16)
    assert np.array_equal(first_kernel[:, :8], single.layers[0].get_weights()[0])
    assert not np.allclose(first_kernel[:, 8:], first_kernel[:, :8])


def test_members_of_different_shapes_are_refused() -> None:
    from training.network import merge_members

    with pytest.raises(ValueError, match="one architecture"):
        merge_members(
            [
                build_network(3, NetworkConfig(widths=(8, 4)), seed=0),
                build_network(3, NetworkConfig(widths=(8, 5)), seed=0),
            ]
        )


def test_cross_entropy_keeps_weighing_rows_the_sigmoid_is_confidently_wrong_about() -> None:
    """Gradient of each loss with respect to the output's logit, for a busy row (target 1)
    scored near 0 (logit -12) and one scored at 0.5 (logit 0): squared error all but ignores the
    confidently wrong row, cross-entropy weighs it more than the undecided one."""
    keras, tf = load_keras(), load_tensorflow()
    weight = {}
    for loss in ("mse", "binary_crossentropy"):
        model = build_network(3, NetworkConfig(widths=(8, 4), loss=loss), seed=3)
        assert model.loss == loss
        logits = tf.Variable([[-12.0], [0.0]])
        with tf.GradientTape() as tape:
            per_row = keras.losses.get(loss)(tf.ones((2, 1)), tf.sigmoid(logits))
            total = tf.reduce_sum(per_row)
        gradient = tape.gradient(total, logits).numpy()[:, 0]
        weight[loss] = gradient[0] / gradient[1]
    assert weight["mse"] < 1e-3
    assert weight["binary_crossentropy"] > 1.9
