"""`nettel train`: held-out links stay unseen, the bundle and its card are complete."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from tests.training.needs_keras import skip_without_keras  # noqa: E402

skip_without_keras()
pytest.importorskip("sklearn")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from service.analysis.features import FEATURE_NAMES  # noqa: E402
from service.errors import ConfigError  # noqa: E402
from service.model.bundle import CARD_FILE, load_bundle  # noqa: E402
from service.model.scaler import MinMaxScaler  # noqa: E402
from training.commands.train import add_evaluate_command, add_train_command  # noqa: E402
from training.dataset import DataSource, build_simulated_dataset, split_links  # noqa: E402
from training.network import NetworkConfig, build_network, fit_network, predict_network  # noqa: E402
from training.train import (  # noqa: E402
    DEFAULT_INPUTS,
    LOG_OFFSETS,
    TrainOptions,
    TrainResult,
    fit_scaler,
    log_offsets,
    options_from_card,
    train_bundle,
)

TINY_NETWORK = NetworkConfig(widths=(16, 8, 4), dropout=0.1)


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    options = TrainOptions(
        source=DataSource(sites=4, days=0.1, seed=2),
        network=TINY_NETWORK,
        epochs=2,
        output=tmp_path_factory.mktemp("train") / "bundle",
        verbose=0,
    )
    return train_bundle(options, log=lambda _: None)


def test_a_tiny_run_learns_a_separable_toy_set() -> None:
    rng = np.random.default_rng(0)
    features = rng.random((4000, 45), dtype=np.float32)
    labels = (features[:, 3] > 0.5).astype(np.float32)
    features[:, 3] += np.where(labels > 0, 0.2, -0.2)  # a margin between the classes
    model = build_network(45, NetworkConfig(dropout=0.1, learning_rate=3e-3), seed=0)
    losses = fit_network(model, features, labels, epochs=8, verbose=0)
    accuracy = np.mean((predict_network(model, features) > 0.5) == (labels > 0.5))
    assert losses[-1] < losses[0] and accuracy > 0.95


def test_the_scaler_sees_training_links_only() -> None:
    dataset = build_simulated_dataset(sites=4, days=0.02, seed=2)
    split = split_links(dataset, 0.25, seed=2)
    scaler = fit_scaler(dataset, split)
    held_out = np.isin(dataset.link, split.holdout)
    dataset.features[held_out] = 1e9  # a held-out row that leaked would move the maximum
    assert fit_scaler(dataset, split).maximum.tolist() == scaler.maximum.tolist()
    columns = [FEATURE_NAMES.index(name) for name in DEFAULT_INPUTS]
    offsets = log_offsets(DEFAULT_INPUTS, "log")
    training_rows = dataset.features[~held_out][:, columns]
    expected = MinMaxScaler.fit_clipped(training_rows, DEFAULT_INPUTS, log_offsets=offsets)
    np.testing.assert_array_equal(scaler.minimum, expected.minimum)
    assert scaler.clip
    assert scaler.maximum.max() < 9  # log10(1e9) of a leaked delay
    linear = fit_scaler(dataset, split, DEFAULT_INPUTS, "linear")
    assert linear.log_offsets == {} and linear.maximum.max() < 1e9


def test_the_loss_and_delays_are_read_on_a_log_scale_by_default() -> None:
    assert log_offsets(DEFAULT_INPUTS, "log") == {
        "newest_delay_above_min": 0.1,
        "newest_delay_std": 0.1,
        "newest_loss": 1e-4,
    }
    assert log_offsets(("newest_loss", "delay_gradient"), "log") == {"newest_loss": 1e-4}
    assert log_offsets(DEFAULT_INPUTS, "linear") == {}
    # losses and spreads chosen besides the default inputs read as the newest ones do
    assert log_offsets(("alltime_loss_mean", "loss_smoothed"), "log") == {
        "alltime_loss_mean": 1e-4,
        "loss_smoothed": 1e-4,
    }
    assert log_offsets(("delay_std_smoothed",), "log") == {"delay_std_smoothed": 0.1}
    assert set(LOG_OFFSETS) - set(DEFAULT_INPUTS) == {
        "alltime_loss_mean",
        "loss_smoothed",
        "delay_std_smoothed",
    }
    with pytest.raises(ValueError, match="input scaling"):
        TrainOptions(input_scaling="sqrt")


def test_the_bundle_loads_and_its_card_describes_the_run(result: TrainResult) -> None:
    bundle = load_bundle(result.directory, FEATURE_NAMES)
    card = json.loads((result.directory / CARD_FILE).read_text())
    assert card == bundle.card
    assert card["name"] == "nettel-utilisation" and card["version"].startswith("sim-")
    assert card["version"].endswith("-2") and card["seed"] == 2
    assert card["target"]["name"] == "nettel" and card["target"]["decision_threshold"] == 0.5
    assert card["architecture"]["widths"] == [16, 8, 4] and card["architecture"]["dropout"] == 0.1
    assert card["epochs"] == 2 and card["training_seconds"] >= 0
    assert card["architecture"]["input_scaling"] == "log"
    assert bundle.scaler.log_offsets == log_offsets(DEFAULT_INPUTS, "log")
    assert options_from_card(card, Path("x")).input_scaling == "log"
    assert card["architecture"]["loss"] == "mse"
    card["architecture"]["loss"] = "binary_crossentropy"
    assert options_from_card(card, Path("x")).network.loss == "binary_crossentropy"
    del card["architecture"]["input_scaling"]  # a card from before: trained on linear scaling
    assert options_from_card(card, Path("x")).input_scaling == "linear"


def test_the_card_says_the_data_was_simulated_and_names_the_held_out_links(
    result: TrainResult,
) -> None:
    data = result.card["training_data"]
    assert data["kind"] == "simulated" and "SIMULATED" in data["note"]
    assert (data["sites"], data["days"], data["seed"], data["links"]) == (4, 0.1, 2, 12)
    assert data["train_links"] + len(data["holdout_links"]) + len(data["calibration_links"]) == 12
    assert all("->" in name for name in data["holdout_links"])
    assert not set(data["holdout_links"]) & set(data["calibration_links"])
    assert data["train_rows"] + data["holdout_rows"] + data["calibration_rows"] == data["rows"]
    assert result.card["calibration"]["fitted_on"]["rows"] == data["calibration_rows"]


def test_the_card_carries_held_out_metrics_for_model_and_baselines(result: TrainResult) -> None:
    metrics = result.card["evaluation"]["metrics"]
    assert set(metrics) == {
        "model",
        "empirical",
        "persistence",
        "linear_regression",
        "logistic_regression",
        "gradient_boosting",
    }
    assert set(metrics["model"]) == {"mse", "mae", "roc_auc", "precision", "recall"}
    assert 0 <= metrics["model"]["mse"] <= 1


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nettel")
    commands = parser.add_subparsers(required=True)
    add_train_command(commands)
    add_evaluate_command(commands)
    return parser.parse_args(argv)


def test_train_command_options() -> None:
    args = parse("train", "--widths", "8,4,2", "--dropout", "0.2", "--target", "ratio")
    assert (args.widths, args.dropout, args.target) == ((8, 4, 2), 0.2, "ratio")
    assert (args.sites, args.seed, args.holdout_fraction, args.output) == (
        20,
        0,
        0.2,
        Path("models/bundle"),
    )
    with pytest.raises(SystemExit):
        parse("train", "--widths", "8,x")


def test_train_inputs_are_presets_or_feature_names() -> None:
    assert parse("train").inputs is None  # TrainOptions' default: DEFAULT_INPUTS
    assert parse("train").input_scaling == TrainOptions().input_scaling == "log"
    assert parse("train", "--input-scaling", "linear").input_scaling == "linear"
    assert parse("train", "--inputs", "all").inputs == FEATURE_NAMES
    assert parse("train", "--inputs", "newest-minute").inputs == DEFAULT_INPUTS
    chosen = parse("train", "--inputs", "newest_loss, delay_gradient").inputs
    assert chosen == ("newest_loss", "delay_gradient")
    for refused in ("newest_loss,delay_p99", "newest_loss,newest_loss", ","):
        with pytest.raises(SystemExit):
            parse("train", "--inputs", refused)
    with pytest.raises(ValueError, match="newest_loss is named twice"):
        TrainOptions(inputs=("newest_loss", "newest_loss"))


def test_train_command_reports_bad_options_as_config_errors(tmp_path: Path) -> None:
    args = parse("train", "--holdout-fraction", "1.5", "--output", str(tmp_path))
    with pytest.raises(ConfigError, match="holdout fraction"):
        args.run(args)
    args = parse("train", "--perfsonar-dir", str(tmp_path))
    with pytest.raises(ConfigError, match="router map"):
        args.run(args)


def test_train_command_writes_a_bundle(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = parse(
        "train",
        "--sites",
        "3",
        "--days",
        "0.05",
        "--widths",
        "8,4,2",
        "--epochs",
        "1",
        "--quiet",
        "--output",
        str(tmp_path / "bundle"),
    )
    assert args.run(args) == 0
    bundle = load_bundle(tmp_path / "bundle", FEATURE_NAMES)
    assert bundle.card["epochs"] == 1
    assert bundle.feature_names == DEFAULT_INPUTS
    assert "| model |" in capsys.readouterr().out
