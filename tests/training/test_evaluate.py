"""`nettel evaluate`: metrics of the model and five baselines on held-out links, cost outcomes,
an earlier bundle beside, report, plots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.training.needs_keras import skip_without_keras  # noqa: E402

skip_without_keras()
pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from service.analysis.calibration import calibrated_estimates  # noqa: E402
from service.analysis.features import FEATURE_NAMES  # noqa: E402
from service.errors import ModelBundleError  # noqa: E402
from service.model.bundle import CARD_FILE, load_bundle  # noqa: E402
from service.model.scaler import MinMaxScaler  # noqa: E402
from training.bundle_writer import save_bundle  # noqa: E402
from training.dataset import Dataset, DataSource  # noqa: E402
from training.evaluate import (  # noqa: E402
    METHODS,
    Scores,
    compute_metrics,
    cost_outcomes,
    evaluate_bundle,
    format_table,
    served_cost,
)
from training.network import NetworkConfig, build_network  # noqa: E402
from training.train import TrainOptions, TrainResult, train_bundle  # noqa: E402


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    options = TrainOptions(
        source=DataSource(sites=4, days=0.1, seed=1),
        epochs=1,
        verbose=0,
        network=NetworkConfig(widths=(8, 4, 2)),
        output=tmp_path_factory.mktemp("b") / "bundle",
    )
    return train_bundle(options, log=lambda _: None)


@pytest.fixture(scope="module")
def report(trained: TrainResult, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    output = tmp_path_factory.mktemp("evaluation")
    return evaluate_bundle(trained.directory, output), output


def test_metrics_have_known_values() -> None:
    label = np.array([0.0, 0.0, 0.8, 1.0])
    above = label > 0.7
    scores = Scores(
        estimate=np.array([0.1, 0.6, 0.8, 0.5]),
        score=np.array([0.1, 0.6, 0.8, 0.5]),
        above=np.array([False, True, True, False]),
    )
    metrics = compute_metrics(scores, label, above)
    assert metrics["mse"] == pytest.approx((0.01 + 0.36 + 0 + 0.25) / 4)
    assert metrics["mae"] == pytest.approx((0.1 + 0.6 + 0 + 0.5) / 4)
    assert metrics["roc_auc"] == pytest.approx(0.75)  # 3 of the 4 (positive, negative) pairs
    assert (metrics["precision"], metrics["recall"]) == (0.5, 0.5)


def test_a_classifier_without_an_estimate_has_no_mse() -> None:
    scores = Scores(None, np.array([0.2, 0.9]), np.array([False, True]))
    metrics = compute_metrics(scores, np.array([0.0, 0.9]), np.array([False, True]))
    assert (metrics["mse"], metrics["mae"], metrics["roc_auc"]) == (None, None, 1.0)


def test_report_has_every_method_and_the_held_out_links(
    report: tuple[dict, Path], trained: TrainResult
) -> None:
    content, output = report
    assert json.loads((output / "report.json").read_text()) == content
    assert set(content) >= {
        "bundle",
        "target",
        "event",
        "decision_threshold",
        "holdout_links",
        "rows",
        "positives",
        "metrics",
        "plots",
    }
    assert tuple(content["metrics"]) == METHODS
    assert content["holdout_links"] == trained.card["training_data"]["holdout_links"]
    assert content["rows"] == trained.card["training_data"]["holdout_rows"]
    assert content["bundle"]["sha256"] == trained.card["sha256"]


def test_the_report_repeats_the_cards_metrics(
    report: tuple[dict, Path], trained: TrainResult
) -> None:
    for method, metrics in report[0]["metrics"].items():
        assert metrics == pytest.approx(trained.card["evaluation"]["metrics"][method])


def test_plots_are_written(report: tuple[dict, Path]) -> None:
    content, output = report
    plots = set(content["plots"])
    assert {"error_histogram.png", "calibration.png"} <= plots
    link_plots = [p for p in plots if p.startswith("links/")]
    assert 1 <= len(link_plots) <= 12
    assert all((output / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in plots)


def test_format_table_has_a_row_per_method(report: tuple[dict, Path]) -> None:
    table = format_table(report[0])
    assert all(f"| {method} |" in table for method in METHODS)
    assert "| empirical | n/a | n/a |" in table


def test_a_card_whose_held_out_links_differ_is_refused(
    trained: TrainResult, tmp_path: Path
) -> None:
    card = json.loads((trained.directory / CARD_FILE).read_text())
    card["training_data"]["holdout_links"] = ["SITE-01->SITE-02"]
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    for path in trained.directory.iterdir():
        (bundle_dir / path.name).write_bytes(path.read_bytes())
    (bundle_dir / CARD_FILE).write_text(json.dumps(card))
    load_bundle(bundle_dir, FEATURE_NAMES)  # still a valid bundle
    with pytest.raises(ModelBundleError, match="held-out links differ"):
        evaluate_bundle(bundle_dir, tmp_path / "out")


def test_served_cost_reads_the_newest_minute_from_the_features(trained: TrainResult) -> None:
    """The cost evaluated is the one `analyse_links` serves: newest loss, delay above the
    all-time minimum, the all-time minimum and filter verdict come from their feature columns."""
    bundle = load_bundle(trained.directory, FEATURE_NAMES)
    features = np.zeros((4, len(FEATURE_NAMES)), np.float32)
    column = {name: i for i, name in enumerate(FEATURE_NAMES)}
    features[0, column["newest_loss"]] = 0.01  # h = 0.05385
    features[1, column["alltime_delay_min"]] = 10.0  # h = 0.2368 log 2
    features[2, column["newest_filter_congested"]] = 1.0
    features[3, column["newest_delay_above_min"]] = 20.0  # weight 0
    rows = Dataset(
        features=features,
        utilisation=np.zeros(4, np.float32),
        label=np.zeros(4, np.float32),
        link=np.zeros(4, np.int32),
        minute=np.zeros(4, np.int64),
        empirical=np.zeros(4, np.float32),
        persistence=np.zeros(4, np.float32),
        target="nettel",
        link_names=("a->b",),
        prone=np.zeros(1, bool),
    )
    zero = np.zeros(4)
    expected = [1 - np.exp(-0.05385), 1 - np.exp(-0.2368 * np.log(2)), 0.5, 0.0]
    np.testing.assert_allclose(served_cost(zero, None, rows), expected, rtol=1e-6)
    served = served_cost(zero, bundle.calibration, rows)
    assert calibrated_estimates(zero, bundle.calibration)[0][2] > 0  # a probability ...
    assert served[2] == 0.0  # ... replaces the filter's floor of 0.5 (and has weight 0)


def test_cost_outcomes_count_false_alarms_and_misses() -> None:
    cost = np.array([0.5, 0.49, 0.1, 0.5, 0.49, 0.9])
    utilisation = np.array([0.1, 0.2, 0.3, 0.95, 0.91, 0.7])
    outcomes = cost_outcomes(cost, utilisation)
    assert outcomes == {
        "false_alarm_rate": pytest.approx(1 / 3),
        "miss_rate": 0.5,
        "calm_rows": 3,
        "busy_rows": 2,
    }
    assert cost_outcomes(cost[2:3], utilisation[2:3])["miss_rate"] is None


def test_each_family_reports_its_cost_outcomes(report: tuple[dict, Path]) -> None:
    for family in report[0]["families"].values():
        assert set(family["cost"]) == {"model", "filter_floor"}
        for outcome in family["cost"].values():
            assert outcome["calm_rows"] > 0


def test_an_earlier_bundle_is_scored_beside_on_the_same_rows(
    trained: TrainResult, tmp_path: Path
) -> None:
    """A bundle of netTel's 45 features (as shipped before the newest-minute ones) is scored as
    `earlier_bundle`, its cost with the filter's floor as served before."""
    names = FEATURE_NAMES[:45]
    rows = np.random.default_rng(2).random((50, len(FEATURE_NAMES))).astype(np.float32)
    scaler = MinMaxScaler.fit_clipped(rows[:, :45], names)
    model = build_network(45, NetworkConfig(widths=(4, 2)), seed=1)
    earlier_dir = save_bundle(tmp_path / "earlier", model, scaler, {"name": "old", "version": "1"})
    earlier = load_bundle(earlier_dir, FEATURE_NAMES)
    report = evaluate_bundle(trained.directory, tmp_path / "out", earlier=earlier)
    assert "earlier_bundle" in report["metrics"]
    assert report["metrics"]["earlier_bundle"]["mse"] is not None
    assert all("earlier_bundle" in f["cost"] for f in report["families"].values())
