"""`nettel train`: dataset -> link split -> scaler (training links only) -> network -> bundle.

The held-out and calibration links never reach the scaler or the network; after saving, the
bundle is loaded back through `service.model.bundle.load_bundle` (the numpy serving path), its
calibration (congestion probability, utilisation interval) is fitted on the calibration links
(`training.calibrate`) and written into it, then it is scored on the held-out links and the
metrics are added to the model card.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.analysis.empirical_filter import LOSS_THRESHOLD
from service.analysis.features import (
    FEATURE_NAMES,
    NEWEST_FEATURE_NAMES,
    feature_columns,
    feature_list_problem,
)
from service.model.bundle import CARD_FILE, ModelBundle, load_bundle
from service.model.scaler import MinMaxScaler
from training.bundle_writer import save_bundle, write_calibration
from training.calibrate import fit_calibration
from training.dataset import CONGESTED_RATIO, Dataset, DataSource, LinkSplit, split_by_family
from training.evaluate import DECISION_THRESHOLD, evaluate_holdout, predict
from training.network import BATCH_SIZE, NetworkConfig, fit_network, train_members

if TYPE_CHECKING:  # importing Keras here would precede training.network's TensorFlow settings
    import keras

MODEL_NAME = "nettel-utilisation"
#: The network's inputs unless told otherwise: the newest minute's five features. Trained with
#: netTel's 45 smoothed-history features beside them, the network fitted each simulator
#: family's history and ranked the busy minutes of families it had not seen far worse
#: (docs/model.md, section 8); all 50 stay computed and can be chosen (`--inputs all`).
DEFAULT_INPUTS = NEWEST_FEATURE_NAMES
DEFAULT_EPOCHS = 30
#: Inputs read on a log scale (`--input-scaling log`, the default) and their log10 offsets: loss
#: and delays span orders of magnitude, which linear bounds squeeze into the bottom of the range
#: (service.model.scaler). The loss's offset is the empirical filter's loss threshold (smaller
#: losses all read alike), the delays' perfSONAR 5's 0.1 ms histogram bucket (what 30 % of the
#: links resolve). The mean above the median is signed and the filter's verdict 0 or 1: linear.
#: Losses and spreads of the history (inputs only when chosen) read as the newest ones do.
LOG_OFFSETS = {
    "newest_loss": LOSS_THRESHOLD,
    "alltime_loss_mean": LOSS_THRESHOLD,
    "loss_smoothed": LOSS_THRESHOLD,
    "newest_delay_above_min": 0.1,
    "newest_delay_std": 0.1,
    "delay_std_smoothed": 0.1,
}
INPUT_SCALINGS = ("log", "linear")
DEFAULT_INPUT_SCALING = "log"
#: Share of the links kept from training to fit the calibration (besides the held-out share).
DEFAULT_CALIBRATION_FRACTION = 0.15
TARGET_DEFINITIONS = {
    "nettel": f"utilisation ratio clipped to [0, 1] when above {CONGESTED_RATIO}, else 0 (netTel)",
    "ratio": "utilisation ratio (router bits/s / capacity) clipped to [0, 1]",
}


@dataclass(frozen=True)
class TrainOptions:
    """Everything one training run depends on."""

    source: DataSource = field(default_factory=DataSource)
    target: str = "nettel"
    holdout_fraction: float = 0.2
    calibration_fraction: float = DEFAULT_CALIBRATION_FRACTION
    network: NetworkConfig = field(default_factory=NetworkConfig)
    epochs: int = DEFAULT_EPOCHS
    output: Path = Path("models/bundle")
    verbose: int | str = "auto"
    inputs: tuple[str, ...] = DEFAULT_INPUTS
    input_scaling: str = DEFAULT_INPUT_SCALING

    def __post_init__(self) -> None:
        check_run(self.holdout_fraction, self.calibration_fraction, self.epochs)
        if self.input_scaling not in INPUT_SCALINGS:
            raise ValueError(f"input scaling must be one of {INPUT_SCALINGS}")
        if problem := feature_list_problem(self.inputs):
            raise ValueError(f"inputs: {problem}")
        if self.target not in TARGET_DEFINITIONS:
            raise ValueError(f"need epochs >= 1 and a target in {sorted(TARGET_DEFINITIONS)}")

    @property
    def seed(self) -> int:
        return self.source.seed


def check_run(holdout_fraction: float, calibration_fraction: float, epochs: int) -> None:
    """The split fractions and epochs of any training run, in memory or streamed."""
    if not 0.0 < holdout_fraction < 1.0:
        raise ValueError(f"holdout fraction must be in (0, 1), not {holdout_fraction}")
    if not 0.0 < calibration_fraction < 1.0 - holdout_fraction:
        raise ValueError(
            f"calibration fraction must be in (0, {1 - holdout_fraction:g}), "
            f"not {calibration_fraction}"
        )
    if epochs < 1:
        raise ValueError(f"need epochs >= 1 and a target in {sorted(TARGET_DEFINITIONS)}")


@dataclass(frozen=True)
class TrainResult:
    directory: Path
    card: dict[str, Any]
    dataset_seconds: float
    training_seconds: float
    #: The rows trained and scored on (in-memory runs), for evaluations that follow.
    dataset: Dataset | None = None


def _print(line: str) -> None:
    print(line, flush=True)


def train_bundle(
    options: TrainOptions,
    log: Callable[[str], None] = _print,
    earlier: ModelBundle | None = None,
) -> TrainResult:
    """Run the whole pipeline and write the bundle to `options.output`."""
    started = time.perf_counter()
    dataset = options.source.build(options.target)
    split = split_dataset(dataset, options)
    dataset_seconds = time.perf_counter() - started
    log(_dataset_summary(dataset, split, dataset_seconds))
    return replace(fit_bundle(options, dataset, split, dataset_seconds, earlier), dataset=dataset)


def split_dataset(dataset: Dataset, options: TrainOptions) -> LinkSplit:
    """Training, calibration and held-out links (per simulator family, `split_by_family`)."""
    return split_by_family(
        dataset, options.holdout_fraction, options.seed, options.calibration_fraction
    )


def fit_bundle(
    options: TrainOptions,
    dataset: Dataset,
    split: LinkSplit,
    dataset_seconds: float = 0.0,
    earlier: ModelBundle | None = None,
) -> TrainResult:
    """Train on `split.train`, save, calibrate on `split.calibration`, score `split.holdout`
    (beside an `earlier` bundle, if given)."""
    model, scaler, losses, seconds = train_network(options, dataset, split)
    card = build_card(options, dataset, split, losses, seconds)
    directory = save_bundle(options.output, model, scaler, card)
    add_calibration(directory, dataset, split)
    card = add_evaluation(directory, dataset, split, earlier)
    return TrainResult(directory, card, dataset_seconds, seconds)


def add_calibration(directory: Path, dataset: Dataset, split: LinkSplit) -> ModelBundle:
    """Fit the calibration on the calibration links' rows (numpy serving path), write it into
    the bundle and its card; return the reloaded, calibrated bundle."""
    bundle = load_bundle(directory, FEATURE_NAMES)
    rows = dataset.rows_of(split.calibration)
    calibration = fit_calibration(predict(bundle, rows.features), rows.utilisation, rows.label)
    entry = write_calibration(directory, calibration)
    entry["fitted_on"] = {"links": len(split.calibration), "rows": len(rows)}
    card = {**bundle.card, "calibration": entry}
    (directory / CARD_FILE).write_text(json.dumps(card, indent=2) + "\n")
    return load_bundle(directory, FEATURE_NAMES)


def train_network(
    options: TrainOptions, dataset: Dataset, split: LinkSplit
) -> tuple[keras.Sequential, MinMaxScaler, list[float], float]:
    """Scaler and network fitted on the training links only, the epoch losses and the seconds."""
    scaler = fit_scaler(dataset, split, options.inputs, options.input_scaling)
    train = dataset.rows_of(split.train)
    started = time.perf_counter()
    features = scaler.transform(train.features[:, feature_columns(options.inputs)])
    model, losses = train_members(
        len(options.inputs),
        options.network,
        options.seed,
        lambda member: fit_network(
            member, features, train.label, options.epochs, verbose=options.verbose
        ),
    )
    return model, scaler, losses, time.perf_counter() - started


def fit_scaler(
    dataset: Dataset,
    split: LinkSplit,
    inputs: tuple[str, ...] = DEFAULT_INPUTS,
    input_scaling: str = DEFAULT_INPUT_SCALING,
) -> MinMaxScaler:
    """Clipped min-max bounds of the `inputs` from the training links' rows only: held-out
    links stay unseen."""
    rows = dataset.rows_of(split.train).features[:, feature_columns(inputs)]
    return MinMaxScaler.fit_clipped(rows, inputs, log_offsets=log_offsets(inputs, input_scaling))


def log_offsets(inputs: tuple[str, ...], input_scaling: str) -> dict[str, float]:
    """The LOG_OFFSETS of those `inputs` read on a log scale (none with linear scaling)."""
    if input_scaling == "linear":
        return {}
    return {name: LOG_OFFSETS[name] for name in inputs if name in LOG_OFFSETS}


def _dataset_summary(dataset: Dataset, split: LinkSplit, seconds: float) -> str:
    held_rows = int(dataset.rows_of(split.holdout).label.size)
    calibration_rows = int(dataset.rows_of(split.calibration).label.size)
    return (
        f"dataset: {len(dataset)} rows ({len(dataset) - held_rows - calibration_rows} training,"
        f" {calibration_rows} calibration, {held_rows} held out), {len(split.train)} training"
        f" links, {len(split.calibration)} calibration links, {len(split.holdout)} held-out"
        f" links, built in {seconds:.0f} s"
    )


def build_card(
    options: TrainOptions, dataset: Dataset, split: LinkSplit, losses: list[float], seconds: float
) -> dict[str, Any]:
    """Model card fields of an in-memory run (save_bundle adds sha256 and feature_names)."""
    return card_fields(
        kind="sim" if options.source.simulated else "real",
        target=options.target,
        seed=options.seed,
        network=options.network,
        input_scaling=options.input_scaling,
        epochs=options.epochs,
        training_data=_data_card(options, dataset, split),
        losses=losses,
        seconds=seconds,
    )


def card_fields(
    *,
    kind: str,
    target: str,
    seed: int,
    network: NetworkConfig,
    input_scaling: str,
    epochs: int,
    training_data: dict[str, Any],
    losses: list[float],
    seconds: float,
) -> dict[str, Any]:
    """The model card of any training run, `kind` ("sim" or "real") naming its version."""
    created = datetime.now(UTC)
    return {
        "name": MODEL_NAME,
        "version": f"{kind}-{created:%Y%m%d}-{seed}",
        "created": created.isoformat(timespec="seconds"),
        "target": {
            "name": target,
            "definition": TARGET_DEFINITIONS[target],
            "decision_threshold": DECISION_THRESHOLD[target],
        },
        "training_data": training_data,
        "seed": seed,
        "architecture": {
            "widths": list(network.widths),
            "dropout": network.dropout,
            "output_activation": network.output_activation,
            "optimizer": network.optimizer,
            "learning_rate": network.learning_rate,
            "loss": network.loss,
            "batch_size": BATCH_SIZE,
            "input_scaling": input_scaling,
            "monotone": network.monotone,
            "ensemble": network.ensemble,
        },
        "epochs": epochs,
        "final_training_loss": losses[-1],
        "training_seconds": round(seconds, 1),
        "trained_on": f"{platform.machine()} Python {platform.python_version()}",
    }


def _data_card(options: TrainOptions, dataset: Dataset, split: LinkSplit) -> dict[str, Any]:
    return {
        **dataset.description,
        "holdout_fraction": options.holdout_fraction,
        "calibration_fraction": options.calibration_fraction,
        "calibration_links": dataset.names_of(split.calibration),
        "train_links": len(split.train),
        "train_rows": int(dataset.rows_of(split.train).label.size),
        "holdout_rows": int(dataset.rows_of(split.holdout).label.size),
        "calibration_rows": int(dataset.rows_of(split.calibration).label.size),
        "holdout_links": dataset.names_of(split.holdout),
    }


def add_evaluation(
    directory: Path, dataset: Dataset, split: LinkSplit, earlier: ModelBundle | None = None
) -> dict[str, Any]:
    """Score the saved bundle (numpy path) on the held-out links; add the metrics to its card."""
    bundle = load_bundle(directory, FEATURE_NAMES)
    report = evaluate_holdout(bundle, dataset, split, earlier)
    card = {
        **bundle.card,
        "evaluation": {
            key: report[key]
            for key in ("event", "decision_threshold", "rows", "positives", "metrics", "families")
            if key in report
        },
    }
    (directory / CARD_FILE).write_text(json.dumps(card, indent=2) + "\n")
    return card


def options_from_card(card: dict[str, Any], output: Path, verbose: int | str = 0) -> TrainOptions:
    """The training options a simulated bundle's card records, for a dataset of its source."""
    data = card["training_data"]
    if data.get("kind") != "simulated":
        raise ValueError("a bundle trained on simulated links is needed")
    architecture = card["architecture"]
    return TrainOptions(
        source=DataSource.from_description(data),
        target=card["target"]["name"],
        holdout_fraction=data["holdout_fraction"],
        calibration_fraction=data.get("calibration_fraction", DEFAULT_CALIBRATION_FRACTION),
        network=NetworkConfig(
            widths=tuple(architecture["widths"]),
            dropout=float(architecture["dropout"]),
            monotone=bool(architecture.get("monotone", False)),  # not before the key
            ensemble=int(architecture.get("ensemble", 1)),
            loss=architecture.get("loss", "mse"),
        ),
        epochs=int(card["epochs"]),
        output=output,
        verbose=verbose,
        inputs=tuple(card["feature_names"]),
        input_scaling=architecture.get("input_scaling", "linear"),  # linear before the key
    )
