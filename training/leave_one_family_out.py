"""Leave-one-family-out evaluation: how each method does on queue physics it never saw.

The simulator families share only the measurement interface: A (M/M/1/K queues,
`simulation.simulator`), B (fluid FIFO queues with self-similar traffic, policers, shapers and
shared hops, `simulation.simulator_fluid`) and C (packet-level TCP flows in ns-3,
`simulation.simulator_ns3`). For each family F the network is trained anew (the options'
architecture, epochs and seed) on the training links of the other two families and calibrated on
their calibration links (`split_by_family`, as `nettel train` splits them), and every method is
scored on every link of F: the network, the empirical filter, linear and logistic regression and
gradient-boosted trees (fitted on the same training links), persistence (an oracle: the true
utilisation a minute earlier), and, when given, an earlier bundle. Nothing of F reaches any fit.

Per left-out family the report has each method's metrics, the calibration of
`congestion_probability` and the cost outcomes (false alarms below 50 % utilisation, misses above
90 %) of the served cost, the filter's floor and the earlier bundle (`training.evaluate`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from service.model.bundle import CARD_FILE, ModelBundle
from simulation.defaults import SIMULATOR_FAMILIES
from training.dataset import Dataset, LinkSplit, family_links
from training.train import TrainOptions, fit_bundle, split_dataset

ALL_FAMILIES = "+".join(SIMULATOR_FAMILIES)
REPORT_FILE = "leave_one_family_out.json"
#: What the network must match or beat on every left-out family (persistence is an oracle).
BASELINES = ("empirical", "linear_regression", "logistic_regression", "gradient_boosting")
#: The calibration target per left-out family; the headline states by how much it is missed.
ECE_TARGET = 0.05


def leave_one_family_out(
    options: TrainOptions,
    output_dir: Path,
    log: Callable[[str], None] = print,
    earlier: ModelBundle | None = None,
) -> dict[str, Any]:
    """Build every family's rows with `options.source`, then `evaluate_left_out`."""
    log(f"leave-one-family-out: building the rows of families {ALL_FAMILIES}")
    dataset = replace(options.source, family=ALL_FAMILIES).build(options.target)
    return evaluate_left_out(options, dataset, output_dir, log, earlier)


def evaluate_left_out(
    options: TrainOptions,
    dataset: Dataset,
    output_dir: Path,
    log: Callable[[str], None] = print,
    earlier: ModelBundle | None = None,
) -> dict[str, Any]:
    """Train without each family in turn (bundles under `output_dir/without-<F>`), score every
    method on that family's links, write REPORT_FILE; return the report."""
    split = split_dataset(dataset, options)
    results = {}
    for left_out, links in family_links(dataset).items():
        log(f"leave-one-family-out: training without family {left_out}")
        subset = LinkSplit(
            np.setdiff1d(split.train, links), links, np.setdiff1d(split.calibration, links)
        )
        trained = fit_bundle(
            replace(options, output=output_dir / f"without-{left_out}"),
            replace(dataset, description={**dataset.description, "left_out_family": left_out}),
            subset,
            earlier=earlier,
        )
        results[left_out] = trained.card["evaluation"]["families"][left_out]
    report = {"data": _data(dataset), "results": results, "headline": headline(results)}
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    return report


def _data(dataset: Dataset) -> dict[str, Any]:
    description = dataset.description
    keys = ("sites", "days", "seed", "family_links")
    return {key: description[key] for key in keys if key in description}


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """Per left-out family: ROC AUC of every method, whether the network is at or above every
    baseline's, the calibration error (and by how much it exceeds ECE_TARGET) and the cost
    outcomes."""
    table = {}
    for family, result in results.items():
        auc = {name: metrics["roc_auc"] for name, metrics in result["metrics"].items()}
        best = max((auc[name] or 0.0) for name in BASELINES if name in auc)
        ece = (result.get("calibration") or {}).get("expected_calibration_error")
        table[family] = {
            "rows": result["rows"],
            "positives": result["positives"],
            "roc_auc": auc,
            "network_at_or_above_every_baseline": (auc["model"] or 0.0) >= best,
            "expected_calibration_error": ece,
            "expected_calibration_error_target": ECE_TARGET,
            "expected_calibration_error_over_target": (
                None if ece is None else round(max(ece - ECE_TARGET, 0.0), 4)
            ),
            "cost": result["cost"],
        }
    return table


def record_in_card(bundle_dir: Path, report: dict[str, Any]) -> None:
    """Add the headline to the bundle's model card as `leave_one_family_out`."""
    path = bundle_dir / CARD_FILE
    card = json.loads(path.read_text())
    card["leave_one_family_out"] = report["headline"]
    path.write_text(json.dumps(card, indent=2) + "\n")


def format_headline(report: dict[str, Any]) -> str:
    """ROC AUC per method (rows) and left-out family (columns), then ECE and cost outcomes."""
    table = report["headline"]
    families = list(table)
    methods = list(next(iter(table.values()))["roc_auc"])
    lines = [
        "| method | " + " | ".join(f"{f} left out" for f in families) + " |",
        "|---|" + "---|" * len(families),
    ]
    for method in methods:
        cells = [_cell(table[f]["roc_auc"].get(method)) for f in families]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"| left out | rows | above 70 % | ECE | ECE over {ECE_TARGET} by |"
        " network >= every baseline |",
        "|---|---|---|---|---|---|",
    ]
    for family, row in table.items():
        cells = [
            row["rows"],
            row["positives"],
            _cell(row["expected_calibration_error"]),
            _cell(row["expected_calibration_error_over_target"]),
        ]
        lines.append(
            f"| {family} | " + " | ".join(map(str, cells)) + " | "
            f"{'yes' if row['network_at_or_above_every_baseline'] else 'NO'} |"
        )
    lines += ["", format_cost_table({f: table[f]["cost"] for f in families})]
    return "\n".join(lines)


def format_cost_table(costs: dict[str, dict[str, Any]]) -> str:
    """False-alarm and miss rates per family (rows) and cost (columns) as Markdown."""
    kinds = list(next(iter(costs.values())))
    header = " | ".join(f"{kind} false alarms | {kind} misses" for kind in kinds)
    lines = [f"| family | {header} |", "|---|" + "---|---|" * len(kinds)]
    for family, outcome in costs.items():
        cells = [
            f"{_cell(outcome[k]['false_alarm_rate'])} | {_cell(outcome[k]['miss_rate'])}"
            for k in kinds
        ]
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"
