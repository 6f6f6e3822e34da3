"""Cross-family evaluation: what each method loses on queue physics it never saw.

For a bundle trained on simulated links, both simulator families' datasets are rebuilt with the
card's sites, days, seed and start (family A: M/M/1/K, `training.simulator`; family B: fluid
FIFO with self-similar traffic, `training.simulator_fluid`) and split per family as training
split them (`split_by_family`, so each family's held-out links are the card's). For each training
set -- A, B and mixed (both) -- there is one model: the bundle itself for its own family, else a
network trained anew on that set's training links with the card's architecture, epochs and seed
and calibrated on that set's calibration links (saved under the output directory). The baselines
that need fitting (linear and logistic regression) are fitted on the same training links. Every
method is then scored on the held-out links of A and of B through `score_methods`, the same code
as `nettel evaluate`.

Headline, per method: ROC AUC in family (A on A, B on B), across families (A on B, B on A), the
drop from the first to the second, and the mixed model on each family; the calibrated
congestion probability's expected calibration error per (training set, test family).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from models.bundle import CARD_FILE, ModelBundle, load_bundle
from models.network import NetworkConfig
from service.analysis.features import FEATURE_NAMES
from training.dataset import Dataset, DataSource, LinkSplit, family_links, is_congested
from training.evaluate import calibration_metrics, compute_metrics, score_methods
from training.simulation_defaults import FAMILIES
from training.train import DEFAULT_CALIBRATION_FRACTION, TrainOptions, fit_bundle, split_dataset

TRAINING_SETS = FAMILIES
TEST_FAMILIES = ("A", "B")
REPORT_FILE = "cross_family.json"
#: Methods that fit nothing: the same scores whatever the training set.
UNFITTED_METHODS = ("empirical", "persistence")


def options_from_card(card: dict[str, Any], output: Path, verbose: int | str = 0) -> TrainOptions:
    """The training options a bundle's card records, for a mixed dataset of its source."""
    data = card["training_data"]
    if data.get("kind") != "simulated":
        raise ValueError("cross-family evaluation needs a bundle trained on simulated links")
    architecture = card["architecture"]
    return TrainOptions(
        source=DataSource(
            data["sites"], data["days"], data["seed"], data["start_minute"], family="mixed"
        ),
        target=card["target"]["name"],
        holdout_fraction=data["holdout_fraction"],
        calibration_fraction=data.get("calibration_fraction", DEFAULT_CALIBRATION_FRACTION),
        network=NetworkConfig(
            widths=tuple(architecture["widths"]), dropout=float(architecture["dropout"])
        ),
        epochs=int(card["epochs"]),
        output=output,
        verbose=verbose,
    )


def cross_family_evaluation(
    bundle_dir: Path,
    output_dir: Path,
    log: Callable[[str], None] = print,
    verbose: int | str = 0,
) -> dict[str, Any]:
    """Train the other training sets' models, score everything, write cross_family.json."""
    bundle = load_bundle(bundle_dir, FEATURE_NAMES)
    options = options_from_card(bundle.card, output_dir, verbose)
    log("cross-family: building both families' rows")
    dataset = options.source.build(options.target)
    split = split_dataset(dataset, options)
    families = family_links(dataset)
    own_family = bundle.card["training_data"].get("family", "A")
    results: dict[str, Any] = {}
    for training_set in TRAINING_SETS:
        links = np.concatenate(list(families.values())) if training_set == "mixed" else None
        links = families[training_set] if links is None else links
        subset = LinkSplit(
            np.intersect1d(split.train, links),
            np.intersect1d(split.holdout, links),
            np.intersect1d(split.calibration, links),
        )
        if training_set == own_family:
            model = bundle
        else:
            log(f"cross-family: training on family {training_set}")
            model = _train(options, dataset, subset, training_set, output_dir)
        results[training_set] = {
            test: _score(model, dataset, subset, np.intersect1d(split.holdout, families[test]))
            for test in TEST_FAMILIES
        }
    report = {
        "bundle": {"directory": str(bundle_dir), "version": bundle.info.version},
        "bundle_family": own_family,
        "data": {key: bundle.card["training_data"][key] for key in ("sites", "days", "seed")},
        "results": results,
        "headline": headline(results),
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    return report


def record_in_card(bundle_dir: Path, report: dict[str, Any]) -> None:
    """Add the headline (and what was compared) to the bundle's model card as `cross_family`."""
    path = bundle_dir / CARD_FILE
    card = json.loads(path.read_text())
    card["cross_family"] = {
        "training_sets": list(TRAINING_SETS),
        "test_families": list(TEST_FAMILIES),
        "rows": {
            t: {s: report["results"][t][s]["rows"] for s in TEST_FAMILIES} for t in TRAINING_SETS
        },
        **report["headline"],
    }
    path.write_text(json.dumps(card, indent=2) + "\n")


def _train(
    options: TrainOptions, dataset: Dataset, subset: LinkSplit, training_set: str, output: Path
) -> ModelBundle:
    description = dataset.description
    family_data = description if training_set == "mixed" else description["families"][training_set]
    result = fit_bundle(
        replace(options, output=output / f"trained-on-{training_set}"),
        replace(dataset, description=family_data),
        subset,
    )
    return load_bundle(result.directory, FEATURE_NAMES)


def _score(
    model: ModelBundle, dataset: Dataset, subset: LinkSplit, test_links: np.ndarray
) -> dict[str, Any]:
    """Every method on `test_links`, baselines fitted on `subset.train`."""
    scores = score_methods(model, dataset, LinkSplit(subset.train, test_links))
    test = dataset.rows_of(test_links)
    above = is_congested(test.utilisation)
    return {
        "rows": len(test),
        "positives": int(above.sum()),
        "metrics": {name: compute_metrics(s, test.label, above) for name, s in scores.items()},
        "calibration": calibration_metrics(model, test),
    }


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """Per method: ROC AUC in and across families, the drops, the mixed model's; plus ECE."""

    def auc(trained: str, tested: str, method: str) -> float | None:
        value: float | None = results[trained][tested]["metrics"][method]["roc_auc"]
        return value

    methods = results["A"]["A"]["metrics"].keys()
    table: dict[str, Any] = {}
    for method in methods:
        row = {f"{t}->{s}": auc(t, s, method) for t in TRAINING_SETS for s in TEST_FAMILIES}
        fitted = method not in UNFITTED_METHODS  # a drop means something only for these
        row["drop_A_to_B"] = _difference(row["A->A"], row["A->B"]) if fitted else None
        row["drop_B_to_A"] = _difference(row["B->B"], row["B->A"]) if fitted else None
        table[method] = row
    ece = {
        f"{t}->{s}": (results[t][s]["calibration"] or {}).get("expected_calibration_error")
        for t in TRAINING_SETS
        for s in TEST_FAMILIES
    }
    return {"roc_auc": table, "expected_calibration_error": ece}


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def format_headline(report: dict[str, Any]) -> str:
    """The ROC AUC table (rows: methods; columns: trained->tested, drops) as Markdown."""
    table = report["headline"]["roc_auc"]
    columns = [f"{t}->{s}" for t in TRAINING_SETS for s in TEST_FAMILIES]
    columns += ["drop_A_to_B", "drop_B_to_A"]
    lines = [
        "| method | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for method, row in table.items():
        cells = ["n/a" if row[c] is None else f"{row[c]:.4f}" for c in columns]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    ece = report["headline"]["expected_calibration_error"]
    lines.append("")
    lines.append(
        "ECE of congestion_probability: "
        + ", ".join(f"{k} {'n/a' if v is None else f'{v:.4f}'}" for k, v in ece.items())
    )
    return "\n".join(lines)
