"""What choices of inputs, architecture and target are made on: validation figures that read no
held-out link and, for transfers, no row of a family the choice must stay blind to.

`nettel train --validate` trains a configuration as `nettel train` would and reports, without
writing a bundle:

- **in family**: trained on every training link, ROC AUC (utilisation above 70 %) on each
  family's calibration links (never trained on);
- **transfer** `SRC:DST`: trained on family SRC's training links only, ROC AUC on every link of
  family DST that is not held out. A pair that names neither family F says how well the
  configuration carries to physics it never saw without looking at F, which is how a choice
  stays blind to the family left out in `nettel evaluate --leave-one-family-out`.

Figures are ranks of the network's raw output (the calibration, monotone, changes no rank).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from service.analysis.features import feature_columns
from training.dataset import CONGESTED_RATIO, Dataset, LinkSplit, family_links
from training.evaluate import roc_auc
from training.network import predict_network
from training.train import TrainOptions, split_dataset, train_network

REPORT_FILE = "validation.json"


@dataclass(frozen=True)
class Transfer:
    """Train on family `source`, score family `destination`."""

    source: str
    destination: str

    @classmethod
    def parse(cls, text: str) -> Transfer:
        """`"A:C"` -> Transfer("A", "C")."""
        source, colon, destination = text.strip().partition(":")
        if not colon or not source or not destination or source == destination:
            raise ValueError(f"a transfer is SRC:DST of two different families, not {text!r}")
        return cls(source, destination)

    def __str__(self) -> str:
        return f"{self.source}->{self.destination}"


def transfer_links(
    split: LinkSplit, families: dict[str, np.ndarray], transfer: Transfer
) -> tuple[np.ndarray, np.ndarray]:
    """(training links of the source family, links of the destination family not held out)."""
    for family in (transfer.source, transfer.destination):
        if family not in families:
            raise ValueError(f"transfer {transfer}: no family {family} in {sorted(families)}")
    train = np.intersect1d(families[transfer.source], split.train)
    scored = np.setdiff1d(families[transfer.destination], split.holdout)
    return train, scored


def validate(
    options: TrainOptions,
    dataset: Dataset,
    transfers: list[Transfer],
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The in-family and transfer figures of the configuration `options` on `dataset`."""
    split = split_dataset(dataset, options)
    families = family_links(dataset)
    log("validation: training on every training link")
    score = _trained_scorer(options, dataset, split.train)
    in_family = {
        family: score(np.intersect1d(links, split.calibration))
        for family, links in families.items()
    }
    transfer_figures = {}
    for transfer in transfers:
        train, scored = transfer_links(split, families, transfer)
        log(f"validation: transfer {transfer}")
        figures = _trained_scorer(options, dataset, train)(scored)
        transfer_figures[str(transfer)] = {"trained_on": transfer.source, **figures}
    aucs = [v["roc_auc"] for v in in_family.values() if v["roc_auc"] is not None]
    return {
        "configuration": _configuration(options),
        "in_family_calibration_links": in_family,
        "worst_in_family": min(aucs, default=None),
        "transfer": transfer_figures,
    }


def _trained_scorer(
    options: TrainOptions, dataset: Dataset, train_links: np.ndarray
) -> Callable[[np.ndarray], dict[str, Any]]:
    """Train on `train_links` (scaler included); a function scoring the rows of some links."""
    only_training = LinkSplit(train_links, np.zeros(0, np.int64))
    model, scaler, _, _ = train_network(options, dataset, only_training)
    columns = feature_columns(options.inputs)

    def score(links: np.ndarray) -> dict[str, Any]:
        rows = dataset.rows_of(links)
        above = rows.utilisation > CONGESTED_RATIO
        estimate = predict_network(model, scaler.transform(rows.features[:, columns]))
        auc = roc_auc(above, estimate)
        auc = None if auc is None else round(auc, 4)
        return {
            "links": len(links),
            "rows": len(rows),
            "positives": int(above.sum()),
            "roc_auc": auc,
        }

    return score


def _configuration(options: TrainOptions) -> dict[str, Any]:
    network = options.network
    return {
        "inputs": list(options.inputs),
        "input_scaling": options.input_scaling,
        "target": options.target,
        "widths": list(network.widths),
        "dropout": network.dropout,
        "monotone": network.monotone,
        "ensemble": network.ensemble,
        "loss": network.loss,
        "epochs": options.epochs,
        "seed": options.seed,
    }


def write_report(report: dict[str, Any], output_dir: Path) -> Path:
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / REPORT_FILE
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def format_report(report: dict[str, Any]) -> str:
    """One line per figure: in-family calibration links, then each transfer."""
    lines = [
        f"in family {family} (calibration links): ROC AUC {_auc(figures)}"
        for family, figures in report["in_family_calibration_links"].items()
    ]
    worst = report["worst_in_family"]
    lines.append("worst in family: " + ("n/a" if worst is None else f"{worst:.4f}"))
    lines += [
        f"transfer {name} (trained on {figures['trained_on']} only): ROC AUC {_auc(figures)}"
        for name, figures in report["transfer"].items()
    ]
    return "\n".join(lines)


def _auc(figures: dict[str, Any]) -> str:
    auc = figures["roc_auc"]
    return ("n/a" if auc is None else f"{auc:.4f}") + f" ({figures['rows']} rows)"
