"""A calibrated bundle end to end: fitting with exact numbers, the bundle's calibration.json
(round trip, refusals, older bundles), scoring all links of new data (bus capture and ps_owd
export), and /costmatrix through the real served app giving the evaluation's probabilities."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.training.needs_keras import skip_without_keras  # noqa: E402

skip_without_keras()
pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")
pytest.importorskip("pyarrow")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from benchmarks.support.fluid_replay import replay_fluid_mesh  # noqa: E402
from service.analysis.calibration import Calibration, calibrated_estimates  # noqa: E402
from service.analysis.features import FEATURE_NAMES  # noqa: E402
from service.config import Settings  # noqa: E402
from service.errors import ModelBundleError  # noqa: E402
from service.model.bundle import CALIBRATION_FILE, CARD_FILE, load_bundle  # noqa: E402
from service.publish.app import create_app  # noqa: E402
from service.runtime import build_runtime  # noqa: E402
from tests.publish.served_app import serve_app  # noqa: E402
from tests.training.test_dataset import write_capture  # noqa: E402
from tests.training.test_ps_documents import (  # noqa: E402
    capture_as_documents,
    write_router_map,
)
from training.calibrate import (  # noqa: E402
    conformal_half_widths,
    expected_calibration_error,
    fit_calibration,
)
from training.dataset import (  # noqa: E402
    WARMUP_MINUTES,
    DataSource,
    build_fluid_dataset,
)
from training.evaluate import evaluate_all_links, predict  # noqa: E402
from training.network import NetworkConfig  # noqa: E402
from training.train import TrainOptions, TrainResult, train_bundle  # noqa: E402

SEED = 3


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    options = TrainOptions(
        source=DataSource(sites=3, days=0.05, seed=SEED, family="mixed"),
        epochs=1,
        verbose=0,
        holdout_fraction=0.3,
        calibration_fraction=0.3,
        network=NetworkConfig(widths=(8, 4, 2)),
        output=tmp_path_factory.mktemp("b") / "bundle",
    )
    return train_bundle(options, log=lambda _: None)


def test_isotonic_fit_pools_violators_and_interpolates() -> None:
    c = fit_calibration(
        np.array([0.1, 0.2, 0.3, 0.4, 0.9]),
        np.array([0.1, 0.8, 0.2, 0.75, 0.9]),
        np.array([0.0, 0.8, 0.0, 0.75, 0.9]),
    )
    assert c.probability_x.tolist() == [0.1, 0.2, 0.3, 0.4, 0.9]
    assert c.probability_y.tolist() == [0.0, 0.5, 0.5, 1.0, 1.0]  # (1 + 0) / 2 pooled
    probability, _, _ = calibrated_estimates(np.array([0.0, 0.25, 0.35, 1.0, np.nan]), c)
    np.testing.assert_allclose(probability[:4], [0.0, 0.5, 0.75, 1.0])
    assert np.isnan(probability[4])


def test_conformal_half_widths_per_bin_and_exact_interval() -> None:
    estimate = np.concatenate([np.zeros(60), np.full(60, 0.9)])
    label = np.concatenate([np.arange(60) / 1000, 0.9 + np.arange(60) / 100])
    widths = conformal_half_widths(estimate, label, np.array([0.0, 0.5, 1.0]), 0.9)
    # ceil(61 x 0.9) = 55th smallest residual of each bin: 0.054 and 0.54
    np.testing.assert_allclose(widths, [0.054, 0.54])
    c = Calibration(
        np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([0.0, 0.5, 1.0]), widths, 0.9
    )
    _, low, high = calibrated_estimates(np.array([0.1, 0.8]), c)
    np.testing.assert_allclose(low, [0.046, 0.26])
    np.testing.assert_allclose(high, [0.154, 1.0])  # clipped to [0, 1]
    assert expected_calibration_error(
        np.array([0.05, 0.05, 0.95, 0.95]), np.array([0, 0, 1, 1])
    ) == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(kind="pickle"), "not of kind"),
        (lambda d: d["probability"].update(y=[0.5, 0.2]), "not decrease"),
        (lambda d: d["probability"].update(x=[0.1, float("nan")]), "finite"),
        (lambda d: d["interval"].update(half_width=[0.1]), "one more than"),
        (lambda d: d["interval"].update(coverage=1.5), "coverage"),
    ],
)
def test_malformed_calibration_json_is_refused(change, message) -> None:
    good = Calibration(
        np.array([0.1, 0.9]),
        np.array([0.0, 1.0]),
        np.array([0.0, 0.5, 1.0]),
        np.array([0.1, 0.2]),
        0.9,
    )
    document = json.loads(json.dumps(good.to_json()))
    assert Calibration.from_json(document).to_json() == good.to_json()
    change(document)
    with pytest.raises(ValueError, match=message):
        Calibration.from_json(document)


def test_bundle_round_trips_its_calibration(trained: TrainResult) -> None:
    bundle = load_bundle(trained.directory, FEATURE_NAMES)
    assert bundle.calibration is not None
    stored = json.loads((trained.directory / CALIBRATION_FILE).read_text())
    assert stored == bundle.calibration.to_json()
    entry = bundle.card["calibration"]
    assert entry["file"] == CALIBRATION_FILE and entry["interval_coverage"] == 0.9
    assert entry["fitted_on"]["links"] == len(bundle.card["training_data"]["calibration_links"])
    families = bundle.card["evaluation"]["families"]
    assert set(families) == {"A", "B"}
    ece = families["B"]["calibration"]["expected_calibration_error"]
    assert 0 <= ece <= 1


def test_a_tampered_calibration_is_refused_and_an_old_bundle_serves_nulls(
    trained: TrainResult, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tampered = tmp_path / "tampered"
    shutil.copytree(trained.directory, tampered)
    document = json.loads((tampered / CALIBRATION_FILE).read_text())
    document["probability"]["y"][-1] = 0.0
    (tampered / CALIBRATION_FILE).write_text(json.dumps(document))
    with pytest.raises(ModelBundleError, match="calibration.json sha256"):
        load_bundle(tampered, FEATURE_NAMES)
    old = tmp_path / "old"
    shutil.copytree(trained.directory, old)
    card = json.loads((old / CARD_FILE).read_text())
    del card["calibration"]
    (old / CARD_FILE).write_text(json.dumps(card))
    (old / CALIBRATION_FILE).unlink()
    with caplog.at_level(logging.INFO, logger="nettel.model"):
        bundle = load_bundle(old, FEATURE_NAMES)
    assert bundle.calibration is None
    assert "has no calibration" in caplog.text


def test_all_links_scores_a_bus_capture_and_its_ps_owd_export_alike(
    trained: TrainResult, tmp_path: Path
) -> None:
    minutes = WARMUP_MINUTES + 8
    ips, utilisation = write_capture(tmp_path / "bus", minutes)
    router_map = write_router_map(tmp_path, ips, utilisation)
    exports = tmp_path / "exports"
    exports.mkdir()
    documents = capture_as_documents(tmp_path / "bus")
    owd = [d for d in documents if "delay_mean" in d]
    loss = [json.dumps(d) for d in documents if "packet_loss" in d]
    pq.write_table(pa.Table.from_pylist(owd), exports / "ps_owd.parquet")
    (exports / "ps_packetloss.jsonl").write_text("\n".join(loss) + "\n")

    bus = evaluate_all_links(
        trained.directory,
        tmp_path / "out-bus",
        DataSource(perfsonar_dir=tmp_path / "bus", router_map=router_map),
    )
    export = evaluate_all_links(
        trained.directory,
        tmp_path / "out-export",
        DataSource(perfsonar_dir=exports, router_map=router_map),
    )

    assert bus["mode"] == "all-links" and bus["rows"] == 2 * 8  # both links, every minute
    assert sorted(bus["holdout_links"]) == sorted([f"{ips[0]}->{ips[1]}", f"{ips[1]}->{ips[0]}"])
    assert set(bus["metrics"]) == {"model", "empirical", "persistence"}  # nothing to fit on
    assert (
        bus["calibration"]["reliability"]["rows"]
        and (tmp_path / "out-bus" / "reliability.png").exists()
    )
    assert json.loads((tmp_path / "out-bus" / "report.json").read_text()) == bus
    for key in ("rows", "positives", "metrics", "calibration"):
        assert export[key] == bus[key]


# the served replay applies what the dataset's rows saw (coarse links included), so the
# estimates are equal and only the 4-decimal rounding of the published interval is left
PUBLISHED_4_DECIMALS = 5e-5


def test_served_congestion_probability_equals_the_evaluated_one(trained: TrainResult) -> None:
    """Family-B minutes replayed into a served runtime: /costmatrix over HTTP carries, for every
    link, the probability and interval the evaluation computes from the dataset's last row."""
    sites, rows = 3, 4
    start = int(time.time() // 60) - rows  # recent, so the served view is current
    dataset = build_fluid_dataset(sites, rows / 1440, SEED, "nettel", start)
    bundle = load_bundle(trained.directory, FEATURE_NAMES)
    last = dataset.select(dataset.minute == dataset.minute.max())
    probability, low, high = calibrated_estimates(
        predict(bundle, last.features), bundle.calibration
    )

    runtime = build_runtime(Settings(model=str(trained.directory), publish_telemetry=False))
    endpoints = replay_fluid_mesh(runtime.state, sites, SEED, start, rows)
    runtime.cycle.recompute()
    with serve_app(create_app(runtime)) as url:
        served = httpx.get(f"{url}/costmatrix").json()["links"]

    by_link = {(link["source"], link["destination"]): link for link in served}
    assert len(last) == len(endpoints) == len(by_link)
    for row, link_id in enumerate(last.link):
        endpoint = endpoints[link_id]
        link = by_link[(endpoint.source, endpoint.destination)]
        assert abs(link["congestion_probability"] - probability[row]) <= 1e-6
        assert link["utilisation_low"] == pytest.approx(low[row], abs=PUBLISHED_4_DECIMALS)
        assert link["utilisation_high"] == pytest.approx(high[row], abs=PUBLISHED_4_DECIMALS)
        assert link["utilisation_low"] <= link["utilisation"] <= link["utilisation_high"]
