"""Bundles: save_bundle -> load_bundle serves what Keras computes; corrupt bundles are refused."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service.analysis.features import FEATURE_NAMES
from service.config import DEFAULT_BUNDLE
from service.errors import ModelBundleError
from service.model.bundle import (
    CALIBRATION_FILE,
    CARD_FILE,
    MODEL_FILE,
    PREDICT_BATCH_ROWS,
    SCALER_FILE,
    file_sha256,
    load_bundle,
)
from service.model.scaler import MinMaxScaler
from tests.training.needs_keras import skip_without_keras
from training import network
from training.bundle_writer import save_bundle

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CARD = {"name": "test-model", "version": "0.0.1"}


@pytest.fixture(scope="module")
def rows() -> np.ndarray:
    rng = np.random.default_rng(0)
    return (rng.random((500, len(FEATURE_NAMES))) * np.arange(1, len(FEATURE_NAMES) + 1)).astype(
        np.float32
    )


@pytest.fixture(scope="module", params=["sigmoid", "linear"])
def trained(request: pytest.FixtureRequest, rows: np.ndarray) -> tuple:
    """A Keras model (one epoch) and its scaler; skipped where Keras is not installed."""
    skip_without_keras()
    scaler = MinMaxScaler.fit_clipped(rows[:400], FEATURE_NAMES)
    config = network.NetworkConfig(output_activation=request.param)
    model = network.build_network(len(FEATURE_NAMES), config, 1)
    features = scaler.transform(rows[:400])
    network.fit_network(model, features, rows[:400, 0] / 45, epochs=1, verbose=0)
    return model, scaler, network.predict_network


@pytest.fixture
def bundle_dir(tmp_path: Path) -> Path:
    """A copy of the shipped bundle to damage (loading needs numpy and h5py only)."""
    return Path(shutil.copytree(DEFAULT_BUNDLE, tmp_path / "bundle"))


@pytest.fixture
def saved_dir(tmp_path: Path, trained: tuple) -> Path:
    model, scaler, _ = trained
    return save_bundle(tmp_path / "saved", model, scaler, CARD)


def edit_json(path: Path, change: Callable[[Any], object]) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def test_round_trip_serves_what_keras_computes(
    saved_dir: Path, trained: tuple, rows: np.ndarray
) -> None:
    model, scaler, predict_network = trained
    bundle = load_bundle(saved_dir, FEATURE_NAMES)
    keras_output = np.clip(predict_network(model, scaler.transform(rows)), 0.0, 1.0)
    np.testing.assert_allclose(bundle.predict(rows), keras_output, atol=1e-5, rtol=0)


def test_a_log_scaled_bundle_serves_what_training_computes(
    tmp_path: Path, rows: np.ndarray
) -> None:
    """The serving path (scaler.json read back, numpy network) scales each row exactly as the
    training run's scaler did, and predicts what Keras does on those inputs."""
    skip_without_keras()
    names = FEATURE_NAMES[-5:]
    offsets = {"newest_loss": 1e-4, "newest_delay_above_min": 0.1}
    inputs = rows[:, -5:] / 100  # losses and delays from 0 up to 0.5
    scaler = MinMaxScaler.fit_clipped(inputs[:400], names, log_offsets=offsets)
    model = network.build_network(5, network.NetworkConfig(widths=(8, 4)), 0)
    network.fit_network(model, scaler.transform(inputs[:400]), inputs[:400, 3], 1, verbose=0)
    served = load_bundle(save_bundle(tmp_path / "log", model, scaler, CARD), FEATURE_NAMES)
    assert served.scaler.log_offsets == offsets
    trained_inputs = scaler.transform(inputs)
    np.testing.assert_array_equal(served.scaler.transform(inputs), trained_inputs)
    keras_output = np.clip(network.predict_network(model, trained_inputs), 0.0, 1.0)
    served_rows = np.zeros_like(rows)
    served_rows[:, -5:] = inputs
    np.testing.assert_allclose(served.predict(served_rows), keras_output, atol=1e-5, rtol=0)


def test_a_scaler_file_from_before_transforms_loads_linear(saved_dir: Path) -> None:
    document = json.loads((saved_dir / SCALER_FILE).read_text())
    assert "transforms" not in document  # fitted without log offsets: the file bundles had
    assert load_bundle(saved_dir, FEATURE_NAMES).scaler.log_offsets == {}


def test_a_bundle_with_a_transform_this_version_does_not_know_is_refused(
    bundle_dir: Path,
) -> None:
    edit_json(
        bundle_dir / SCALER_FILE,
        lambda scaler: scaler.update(transforms={"newest_loss": {"kind": "asinh", "offset": 1}}),
    )
    with pytest.raises(ModelBundleError, match="unknown transform 'asinh' of newest_loss"):
        load_bundle(bundle_dir, FEATURE_NAMES)


def test_card_records_identity_digest_and_features(saved_dir: Path) -> None:
    card = json.loads((saved_dir / CARD_FILE).read_text())
    assert card["sha256"] == file_sha256(saved_dir / MODEL_FILE)
    assert card["feature_names"] == list(FEATURE_NAMES)
    assert {"name", "version", "created"} <= set(card)
    assert sorted(p.name for p in saved_dir.iterdir()) == [MODEL_FILE, CARD_FILE, SCALER_FILE]


def test_save_refuses_a_scaler_that_does_not_fit_the_model(tmp_path: Path, trained: tuple) -> None:
    model, _, _ = trained
    narrow = MinMaxScaler.fit_clipped(np.zeros((2, 3)), ("a", "b", "c"))
    with pytest.raises(ValueError):
        save_bundle(tmp_path, model, narrow, CARD)
    with pytest.raises(ValueError):
        save_bundle(tmp_path, model, trained[1], {"name": "no version"})


def test_a_bundle_naming_a_feature_the_service_does_not_compute_is_refused(
    bundle_dir: Path,
) -> None:
    computed = tuple(name for name in FEATURE_NAMES if name != "newest_loss")
    with pytest.raises(ModelBundleError, match=r"does not compute: \['newest_loss'\]"):
        load_bundle(bundle_dir, (*computed, "delay_p99"))


def test_a_bundle_reads_its_inputs_out_of_the_services_rows_by_name(
    saved_dir: Path, trained: tuple, rows: np.ndarray, tmp_path: Path
) -> None:
    """Whatever order the service's columns come in, and whichever of them a bundle reads (a
    bundle of netTel's 45 features, as shipped before, serves from the 50-column rows)."""
    bundle = load_bundle(saved_dir, FEATURE_NAMES)
    reordered = load_bundle(saved_dir, tuple(reversed(FEATURE_NAMES)))
    np.testing.assert_array_equal(reordered.predict(rows[:, ::-1]), bundle.predict(rows))
    model, _, predict_network = trained
    subset = FEATURE_NAMES[:45]
    skip_without_keras()
    narrow = network.build_network(45, network.NetworkConfig(widths=(4, 2)), 1)
    scaler = MinMaxScaler.fit_clipped(rows[:, :45], subset)
    earlier = load_bundle(save_bundle(tmp_path / "45", narrow, scaler, CARD), FEATURE_NAMES)
    assert earlier.feature_names == subset
    direct = predict_network(narrow, scaler.transform(rows[:, :45]))
    np.testing.assert_allclose(earlier.predict(rows), np.clip(direct, 0, 1), rtol=1e-5, atol=1e-6)


def test_a_card_feature_list_unlike_the_scalers_is_refused(bundle_dir: Path) -> None:
    edit_json(bundle_dir / CARD_FILE, lambda card: card["feature_names"].pop())
    with pytest.raises(ModelBundleError, match="input width does not match"):
        load_bundle(bundle_dir, FEATURE_NAMES)


def test_a_wrong_sha256_is_refused(bundle_dir: Path) -> None:
    edit_json(bundle_dir / CARD_FILE, lambda card: card.update(sha256="0" * 64))
    with pytest.raises(ModelBundleError, match="sha256"):
        load_bundle(bundle_dir, FEATURE_NAMES)


def test_a_truncated_model_file_is_refused(bundle_dir: Path) -> None:
    model_file = bundle_dir / MODEL_FILE
    model_file.write_bytes(model_file.read_bytes()[: model_file.stat().st_size // 2])
    with pytest.raises(ModelBundleError):
        load_bundle(bundle_dir, FEATURE_NAMES)
    # refused for its content too, not only because the digest no longer matches
    edit_json(bundle_dir / CARD_FILE, lambda card: card.update(sha256=file_sha256(model_file)))
    with pytest.raises(ModelBundleError, match="not a readable .keras"):
        load_bundle(bundle_dir, FEATURE_NAMES)


@pytest.mark.parametrize(
    "change",
    [
        lambda scaler: scaler.update(kind="standard"),
        lambda scaler: scaler["min"].pop(),
        lambda scaler: scaler.update(feature_names=list(reversed(scaler["feature_names"]))),
        lambda scaler: scaler.update(min=[None] * len(scaler["min"])),
    ],
    ids=["not-minmax", "short-bounds", "other-feature-order", "non-numeric-bounds"],
)
def test_a_wrong_scaler_is_refused(bundle_dir: Path, change: Callable[[Any], object]) -> None:
    edit_json(bundle_dir / SCALER_FILE, change)
    with pytest.raises(ModelBundleError):
        load_bundle(bundle_dir, FEATURE_NAMES)


def test_a_missing_file_is_refused(bundle_dir: Path) -> None:
    (bundle_dir / SCALER_FILE).unlink()
    with pytest.raises(ModelBundleError):
        load_bundle(bundle_dir, FEATURE_NAMES)


def test_the_shipped_bundle_loads_is_small_and_says_it_is_simulated(bundle_dir: Path) -> None:
    bundle = load_bundle(DEFAULT_BUNDLE, FEATURE_NAMES)
    assert sorted(p.name for p in DEFAULT_BUNDLE.iterdir()) == sorted(
        [MODEL_FILE, CARD_FILE, SCALER_FILE, CALIBRATION_FILE]
    )
    assert sum(p.stat().st_size for p in DEFAULT_BUNDLE.iterdir()) < 1_000_000
    assert bundle.card["training_data"]["kind"] == "simulated"
    assert "SIMULATED" in bundle.card["training_data"]["note"]
    assert bundle.calibration is not None
    assert set(bundle.scaler.log_offsets) == {
        "newest_loss",
        "newest_delay_above_min",
        "newest_delay_std",
    }
    metrics = bundle.card["evaluation"]["metrics"]
    assert metrics["model"]["mse"] <= 0.019
    families = bundle.card["evaluation"]["families"]
    assert set(families) == {"A", "B", "C"}
    for name, family in families.items():
        auc = {method: m["roc_auc"] for method, m in family["metrics"].items()}
        # issue 28's targets on each family's held-out links: no loss of more than 0.01 AUC
        # against the bundle shipped before, above the empirical filter, and a cost with fewer
        # false alarms and no more misses than the one served before
        assert auc["model"] >= auc["earlier_bundle"] - 0.01, name
        assert auc["model"] > auc["empirical"], name
        cost = family["cost"]
        assert cost["model"]["false_alarm_rate"] < cost["earlier_bundle"]["false_alarm_rate"]
        assert cost["model"]["miss_rate"] <= cost["earlier_bundle"]["miss_rate"], name
    for name in ("A", "B"):  # C's 12 held-out links miss it (docs/model.md, section 2)
        assert families[name]["calibration"]["expected_calibration_error"] <= 0.05
    left_out = bundle.card["leave_one_family_out"]
    assert set(left_out) == {"A", "B", "C"}
    for name, row in left_out.items():  # the network never below the filter on unseen physics
        assert row["roc_auc"]["model"] > row["roc_auc"]["empirical"], name
    assert load_bundle(bundle_dir, FEATURE_NAMES).info == bundle.info


def test_predictions_do_not_depend_on_how_rows_are_batched() -> None:
    bundle = load_bundle(DEFAULT_BUNDLE, FEATURE_NAMES)
    rng = np.random.default_rng(1)
    rows = rng.random((2 * PREDICT_BATCH_ROWS + 7, len(FEATURE_NAMES))) * np.arange(
        1, len(FEATURE_NAMES) + 1
    )
    inputs = bundle.scaler.transform(rows[:, bundle.columns])
    at_once = np.clip(bundle.network.predict(inputs), 0.0, 1.0)
    # float32 sums: BLAS picks its kernel (and so the summation order) by matrix shape, which
    # moves results by a few float32 ulps on some CPUs (AVX-512); a misplaced row moves far more.
    np.testing.assert_allclose(bundle.predict(rows), at_once, rtol=0, atol=1e-4)
    assert bundle.predict(rows[:0]).shape == (0,)
