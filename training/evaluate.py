"""Scores a bundle on held-out links against four baselines, through the numpy serving path.

Every method is scored on the same rows (the held-out links' rows) for the same event,
"utilisation above 70 %" (true ratio > 0.7):

- `model`: `ModelBundle.predict` (what `nettel serve` runs), estimate = prediction;
  "above 70 %" when the prediction exceeds DECISION_THRESHOLD[target].
- `empirical`: netTel's delay-and-loss filter score; "above 70 %" when the filter says congested.
  It is not a utilisation estimate, so it has no MSE/MAE.
- `persistence`: the last utilisation known before the minute; its target form is the estimate.
- `linear_regression`: least squares on all the service's features of the training links
  (min-max scaled and clipped as the network's inputs are), fitted to the target; same
  decision threshold as the model.
- `logistic_regression`: fitted on the same rows to "above 70 %"; probability > 0.5. A
  probability is not a utilisation estimate, so it has no MSE/MAE.
- `gradient_boosting`: scikit-learn's histogram gradient-boosted trees fitted on the same rows
  (raw features: trees need no scaling) to "above 70 %"; probability > 0.5; no MSE/MAE.

Each family's `cost` entry says how the cost users consume (`service.analysis.cost`) behaves on
the rows: how often a link below 50 % utilisation costs 0.5 or more (false alarms) and how
often one above 90 % costs less (misses), for the cost served with this bundle (its calibrated
probability as the floor) and for the filter's floor of 0.5 with the same estimate; with an
`earlier` bundle (e.g. the one shipped before, on its own inputs), also for that bundle with the
filter's floor: the cost served before.

MSE and MAE compare the estimate with the target label; ROC AUC ranks by the method's score.
Rows are also scored per simulator family (`families`), and a calibrated bundle's congestion
probability and utilisation interval (`calibration`: expected calibration error, Brier score,
interval coverage and width, reliability table) through `calibrated_estimates`, the function
serving calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import precision_score, recall_score, roc_auc_score

from service.analysis.calibration import Calibration, calibrated_estimates
from service.analysis.cost import compute_cost
from service.analysis.features import FEATURE_NAMES, feature_columns
from service.errors import ModelBundleError
from service.model.bundle import ModelBundle, load_bundle
from service.model.scaler import MinMaxScaler
from training.calibrate import calibration_scores
from training.dataset import (
    CONGESTED_RATIO,
    Dataset,
    DataSource,
    LinkSplit,
    compute_target,
    family_links,
    is_congested,
    split_by_family,
)

#: A prediction above this means "utilisation above 70 %". For the netTel target (0, or the
#: ratio when above 70 %) 0.5 sits between the two label groups; for the ratio it is 0.7 itself.
DECISION_THRESHOLD = {"nettel": 0.5, "ratio": CONGESTED_RATIO}
MAX_LINK_PLOTS = 12
METHODS = (
    "model",
    "empirical",
    "persistence",
    "linear_regression",
    "logistic_regression",
    "gradient_boosting",
)
#: Cost outcomes: a link below CALM_BELOW utilisation with cost >= COST_ALARM is a false alarm,
#: one above BUSY_ABOVE with a lower cost a miss.
CALM_BELOW = 0.5
BUSY_ABOVE = 0.9
COST_ALARM = 0.5
_COST_INPUTS = tuple(
    feature_columns(
        ("newest_loss", "newest_delay_above_min", "alltime_delay_min", "newest_filter_congested")
    )
)


@dataclass(frozen=True)
class Scores:
    """One method's output on the evaluation rows."""

    estimate: np.ndarray | None
    score: np.ndarray
    above: np.ndarray


def score_methods(
    bundle: ModelBundle, dataset: Dataset, split: LinkSplit, earlier: ModelBundle | None = None
) -> dict[str, Scores]:
    """Every method's scores on the held-out rows; baselines are fitted on the training links
    (without training links, as when scoring all links of new data, those are left out). An
    `earlier` bundle is scored too, as `earlier_bundle`."""
    train, test = dataset.rows_of(split.train), dataset.rows_of(split.holdout)
    threshold = DECISION_THRESHOLD[dataset.target]
    predicted = predict(bundle, test.features)
    scores = {
        "model": Scores(predicted, predicted, predicted > threshold),
        "empirical": Scores(None, test.empirical, test.empirical > 0),
        "persistence": Scores(
            compute_target(test.persistence, dataset.target),
            test.persistence,
            is_congested(test.persistence),
        ),
    }
    if earlier is not None:
        before = predict(earlier, test.features)
        scores["earlier_bundle"] = Scores(before, before, before > threshold)
    if not len(train):
        return scores
    scaler = MinMaxScaler.fit_clipped(train.features, FEATURE_NAMES)  # every feature
    x_train, x_test = scaler.transform(train.features), scaler.transform(test.features)
    above = is_congested(train.utilisation)
    linear = LinearRegression().fit(x_train, train.label).predict(x_test)
    logistic = _fit_logistic(x_train, above).predict_proba(x_test)[:, 1]
    boosted = _fit_boosting(train.features, above).predict_proba(test.features)[:, 1]
    return scores | {
        "linear_regression": Scores(np.clip(linear, 0.0, 1.0), linear, linear > threshold),
        "logistic_regression": Scores(None, logistic, logistic > 0.5),
        "gradient_boosting": Scores(None, boosted, boosted > 0.5),
    }


def predict(bundle: ModelBundle, features: np.ndarray) -> np.ndarray:
    """`bundle.predict`, quiet about float32 overflow in exp (a saturated sigmoid is exact)."""
    with np.errstate(over="ignore"):
        return bundle.predict(features)


def _fit_logistic(features: np.ndarray, above: np.ndarray) -> LogisticRegression:
    return LogisticRegression(max_iter=500).fit(features, above)


def _fit_boosting(features: np.ndarray, above: np.ndarray) -> HistGradientBoostingClassifier:
    """Boosted trees, seeded (their early stopping draws a validation share of the rows)."""
    return HistGradientBoostingClassifier(random_state=0).fit(features, above)


def served_cost(estimate: np.ndarray, calibration: Calibration | None, rows: Dataset) -> np.ndarray:
    """The cost `nettel serve` publishes for each row: its newest loss, delay above the link's
    minimum, all-time minimum delay and filter verdict are feature columns; the filter's floor
    applies without a calibration."""
    loss, excess, base, congested = (rows.features[:, column] for column in _COST_INPUTS)
    probability = None if calibration is None else calibrated_estimates(estimate, calibration)[0]
    return compute_cost(estimate, loss, excess, base, congested > 0.5, probability)


def cost_outcomes(cost: np.ndarray, utilisation: np.ndarray) -> dict[str, float | int | None]:
    """Share of calm rows (utilisation < 50 %) costing >= 0.5 and of busy ones (> 90 %) below.

    >>> cost_outcomes(np.array([0.6, 0.1, 0.2, 0.9]), np.array([0.1, 0.2, 0.95, 0.99]))
    {'false_alarm_rate': 0.5, 'miss_rate': 0.5, 'calm_rows': 2, 'busy_rows': 2}
    """
    calm, busy = utilisation < CALM_BELOW, utilisation > BUSY_ABOVE
    return {
        "false_alarm_rate": float(np.mean(cost[calm] >= COST_ALARM)) if calm.any() else None,
        "miss_rate": float(np.mean(cost[busy] < COST_ALARM)) if busy.any() else None,
        "calm_rows": int(calm.sum()),
        "busy_rows": int(busy.sum()),
    }


def cost_report(
    bundle: ModelBundle, rows: Dataset, earlier: ModelBundle | None = None
) -> dict[str, Any]:
    """Cost outcomes on `rows`: served with `bundle`, with its estimate and the filter's floor,
    and (given `earlier`) served as before with the earlier bundle and the filter's floor."""
    estimate = predict(bundle, rows.features)
    report = {
        "model": cost_outcomes(served_cost(estimate, bundle.calibration, rows), rows.utilisation),
        "filter_floor": cost_outcomes(served_cost(estimate, None, rows), rows.utilisation),
    }
    if earlier is not None:
        before = served_cost(predict(earlier, rows.features), None, rows)
        report["earlier_bundle"] = cost_outcomes(before, rows.utilisation)
    return report


def roc_auc(above: np.ndarray, score: np.ndarray) -> float | None:
    """ROC AUC of `score` for the event `above`; None when the rows hold only one class."""
    both_classes = 0 < above.sum() < len(above)
    return float(roc_auc_score(above, score)) if both_classes else None


def compute_metrics(
    scores: Scores, label: np.ndarray, above: np.ndarray
) -> dict[str, float | None]:
    """MSE/MAE of the estimate against the label (None without one), ROC AUC, precision, recall."""
    error = None if scores.estimate is None else scores.estimate - label
    return {
        "mse": None if error is None else float(np.mean(error**2)),
        "mae": None if error is None else float(np.mean(np.abs(error))),
        "roc_auc": roc_auc(above, scores.score),
        "precision": float(precision_score(above, scores.above, zero_division=0)),
        "recall": float(recall_score(above, scores.above, zero_division=0)),
    }


def evaluate_holdout(
    bundle: ModelBundle, dataset: Dataset, split: LinkSplit, earlier: ModelBundle | None = None
) -> dict[str, Any]:
    """The evaluation report (no files): metrics of every method on the held-out links, also
    per simulator family, with the calibration's metrics and the cost outcomes per family."""
    test = dataset.rows_of(split.holdout)
    above = is_congested(test.utilisation)
    scores = score_methods(bundle, dataset, split, earlier)
    families = {}
    for family, links in family_links(dataset).items():
        held = np.isin(test.link, links)
        if held.any():
            families[family] = {
                "rows": int(held.sum()),
                "positives": int(above[held].sum()),
                "metrics": {
                    name: compute_metrics(_rows(s, held), test.label[held], above[held])
                    for name, s in scores.items()
                },
                "calibration": calibration_metrics(bundle, test.select(held)),
                "cost": cost_report(bundle, test.select(held), earlier),
            }
    return {
        "bundle": {
            "name": bundle.info.name,
            "version": bundle.info.version,
            "sha256": bundle.info.sha256,
        },
        "target": dataset.target,
        "event": f"utilisation ratio > {CONGESTED_RATIO}",
        "decision_threshold": DECISION_THRESHOLD[dataset.target],
        "holdout_links": dataset.names_of(split.holdout),
        "rows": len(test),
        "positives": int(above.sum()),
        "metrics": {name: compute_metrics(s, test.label, above) for name, s in scores.items()},
        "calibration": calibration_metrics(bundle, test),
        "families": families,
    }


def calibration_metrics(bundle: ModelBundle, rows: Dataset) -> dict[str, Any] | None:
    """ECE, Brier, interval coverage/width and reliability table on `rows` (None without a
    calibration)."""
    if bundle.calibration is None or not len(rows):
        return None
    calibrated = calibration_scores(predict(bundle, rows.features), bundle.calibration)
    return calibrated.metrics(rows.utilisation, rows.label)


def _rows(scores: Scores, mask: np.ndarray) -> Scores:
    estimate = None if scores.estimate is None else scores.estimate[mask]
    return Scores(estimate, scores.score[mask], scores.above[mask])


def write_evaluation(
    bundle: ModelBundle,
    dataset: Dataset,
    split: LinkSplit,
    output_dir: Path,
    mode: str = "held-out",
    earlier: ModelBundle | None = None,
) -> dict[str, Any]:
    """Evaluate, then write report.json and the PNG plots into `output_dir`; return the report.

    `mode` ("held-out" links of the card, or "all-links" of new data) is recorded in it."""
    output_dir.mkdir(parents=True, exist_ok=True)
    report = {"mode": mode, **evaluate_holdout(bundle, dataset, split, earlier)}
    test = dataset.rows_of(split.holdout)
    predicted = predict(bundle, test.features)
    plots = plot_links(test, predicted, output_dir / "links")
    plots += [
        plot_errors(test, predicted, output_dir),
        plot_calibration(test, predicted, output_dir),
    ]
    if report["calibration"] is not None:
        plots.append(plot_reliability(report, output_dir))
    report["plots"] = [str(path.relative_to(output_dir)) for path in plots]
    (output_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def format_table(report: dict[str, Any]) -> str:
    """The metrics as a Markdown table (what docs/model.md shows)."""
    lines = ["| method | MSE | MAE | ROC AUC | precision | recall |", "|---|---|---|---|---|---|"]
    for name, metrics in report["metrics"].items():
        cells = [_cell(metrics[key]) for key in ("mse", "mae", "roc_auc", "precision", "recall")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


# --- plots ------------------------------------------------------------------------------------


def _pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend, imported when the first plot is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_links(test: Dataset, predicted: np.ndarray, directory: Path) -> list[Path]:
    """Predicted vs true utilisation over time, one PNG per held-out link (busiest first, <= 12)."""
    directory.mkdir(parents=True, exist_ok=True)
    links, rows = np.unique(test.link, return_counts=True)
    congested = np.bincount(test.link, weights=is_congested(test.utilisation))[links]
    chosen = links[np.lexsort((-rows, -congested))][:MAX_LINK_PLOTS]
    return [_plot_link(test, predicted, int(link), directory) for link in chosen]


def _plot_link(test: Dataset, predicted: np.ndarray, link: int, directory: Path) -> Path:
    plt = _pyplot()
    rows = test.link == link
    hours = (test.minute[rows] - test.minute[rows].min()) / 60
    figure, axes = plt.subplots(figsize=(12, 3.5))
    axes.plot(hours, np.clip(test.utilisation[rows], 0, 1), lw=0.8, label="true utilisation")
    axes.plot(hours, test.label[rows], lw=0.8, alpha=0.7, label=f"label ({test.target})")
    axes.plot(hours, predicted[rows], lw=0.8, label="predicted")
    axes.axhline(CONGESTED_RATIO, color="grey", ls=":", lw=0.8)
    axes.set(title=test.link_names[link], xlabel="hours", ylabel="utilisation", ylim=(-0.05, 1.05))
    axes.legend(loc="upper right", fontsize="small")
    path = directory / f"{_file_name(test.link_names[link])}.png"
    return _save(figure, path)


def _file_name(link_name: str) -> str:
    """A link name as a file name: "SITE-01->SITE-02" -> "SITE-01_to_SITE-02".

    >>> _file_name("SITE-01->SITE-02"), _file_name("10.0.1.10->2001:db8::1")
    ('SITE-01_to_SITE-02', '10.0.1.10_to_2001_db8__1')
    """
    return re.sub(r"[^A-Za-z0-9.-]", "_", link_name.replace("->", "_to_"))


def plot_errors(test: Dataset, predicted: np.ndarray, directory: Path) -> Path:
    """Histogram of prediction - label, all rows and rows above 70 %."""
    plt = _pyplot()
    error = predicted - test.label
    above = is_congested(test.utilisation)
    figure, axes = plt.subplots(figsize=(7, 4))
    bins = np.linspace(-1, 1, 81)
    axes.hist(error, bins=bins, alpha=0.6, label="all rows")
    axes.hist(error[above], bins=bins, alpha=0.6, label="utilisation > 70 %")
    axes.set(yscale="log", xlabel="prediction - label", ylabel="rows", title="Error histogram")
    axes.legend()
    return _save(figure, directory / "error_histogram.png")


def plot_calibration(test: Dataset, predicted: np.ndarray, directory: Path, bins: int = 10) -> Path:
    """Per prediction bin: mean label and share of rows above 70 % vs mean prediction."""
    plt = _pyplot()
    index = np.minimum((predicted * bins).astype(int), bins - 1)
    count = np.bincount(index, minlength=bins)
    used = count > 0

    def mean_of(values: np.ndarray) -> np.ndarray:
        return np.bincount(index, weights=values, minlength=bins)[used] / count[used]

    x = mean_of(predicted)
    figure, axes = plt.subplots(figsize=(5, 5))
    axes.plot([0, 1], [0, 1], color="grey", ls=":", lw=0.8)
    axes.plot(x, mean_of(test.label), "o-", label="mean label")
    axes.plot(x, mean_of(is_congested(test.utilisation).astype(float)), "s-", label="share > 70 %")
    axes.set(
        xlabel="mean prediction", ylabel="observed", title="Calibration", xlim=(0, 1), ylim=(0, 1)
    )
    axes.legend()
    return _save(figure, directory / "calibration.png")


def plot_reliability(report: dict[str, Any], directory: Path) -> Path:
    """Reliability diagram of congestion_probability per family: observed rate of "above 70 %"
    against mean predicted probability in each probability bin (ECE in the legend)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(5, 5))
    axes.plot([0, 1], [0, 1], color="grey", ls=":", lw=0.8)
    for family, part in report["families"].items():
        calibration = part["calibration"]
        if calibration is None:
            continue
        table = calibration["reliability"]
        ece = calibration["expected_calibration_error"]
        axes.plot(
            table["mean_probability"], table["observed"], "o-", label=f"{family} (ECE {ece:.3f})"
        )
    axes.set(
        xlabel="congestion_probability (bin mean)",
        ylabel="observed share above 70 %",
        title="Reliability",
        xlim=(0, 1),
        ylim=(0, 1),
    )
    axes.legend()
    return _save(figure, directory / "reliability.png")


def _save(figure: Any, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    _pyplot().close(figure)
    return path


def evaluate_bundle(
    directory: Path,
    output_dir: Path,
    source: DataSource | None = None,
    earlier: ModelBundle | None = None,
) -> dict[str, Any]:
    """Rebuild the card's dataset and split, check the held-out links, write the evaluation.

    `source` replaces the card's data source (e.g. moved real-data files); the held-out links
    rebuilt from it must still be the card's.
    """
    bundle = load_bundle(directory, FEATURE_NAMES)
    data = bundle.card.get("training_data")
    if not isinstance(data, dict) or "holdout_links" not in data:
        raise ModelBundleError(f"model bundle {directory}: the card does not describe its data")
    dataset = (source or DataSource.from_description(data)).build(bundle.card["target"]["name"])
    split = split_by_family(
        dataset,
        data["holdout_fraction"],
        int(bundle.card["seed"]),
        data.get("calibration_fraction", 0.0),
    )
    if dataset.names_of(split.holdout) != data["holdout_links"]:
        raise ModelBundleError(f"model bundle {directory}: the rebuilt held-out links differ")
    return write_evaluation(bundle, dataset, split, output_dir, earlier=earlier)


def evaluate_all_links(
    directory: Path, output_dir: Path, source: DataSource, earlier: ModelBundle | None = None
) -> dict[str, Any]:
    """Score a bundle on every labelled link of `source` (links it never saw: no split, no
    comparison with its card). Baselines fitted on training rows (linear and logistic
    regression) have none here and are left out; the empirical filter and persistence stay."""
    bundle = load_bundle(directory, FEATURE_NAMES)
    dataset = source.build(bundle.card["target"]["name"])
    every_link = LinkSplit(np.zeros(0, np.int64), np.unique(dataset.link))
    return write_evaluation(bundle, dataset, every_link, output_dir, "all-links", earlier)
