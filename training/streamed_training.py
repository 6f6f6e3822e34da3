"""Training from day-partitioned Parquet rows in streamed batches (`nettel train --engine spark`,
`nettel train --dataset DIR`).

The rows (``training.dataset_files`` layout, written by `nettel dataset`) are read batch by
batch, never all at once: one pass for the per-link row and congestion counts (the training,
calibration and held-out links, as ``split_by_family`` draws them for one family), one for the
scaler's bounds over the training links, then every epoch a fresh pass feeding Keras through
``tf.data`` (files in a seeded order per epoch, rows shuffled within each read batch). The
bundle is written with ``service.model.bundle.save_bundle``, calibrated on the calibration links and
scored on the held-out links as `nettel train` does (``training.train.add_calibration``,
``add_evaluation``); for that, the calibration and held-out rows and a uniform sample of the
training rows (for the baselines' fits) are kept, at most ``max_eval_rows`` of each (every k-th
row beyond).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from service.analysis.features import FEATURE_NAMES
from service.model.scaler import MinMaxScaler
from training.bundle_writer import save_bundle
from training.dataset import (
    BUSY_SHARE,
    CONGESTED_RATIO,
    Dataset,
    LinkSplit,
    split_link_ids,
)
from training.dataset_files import open_rows, read_description
from training.network import (
    BATCH_SIZE,
    NetworkConfig,
    fit_network_batches,
    load_tensorflow,
    train_members,
)
from training.train import (
    DEFAULT_CALIBRATION_FRACTION,
    DEFAULT_INPUT_SCALING,
    DEFAULT_INPUTS,
    TrainResult,
    add_calibration,
    add_evaluation,
    card_fields,
    check_run,
    log_offsets,
)

READ_BATCH_ROWS = 65_536
DEFAULT_MAX_EVAL_ROWS = 2_000_000
_LINK = ("source", "destination")
#: Training rows the streamed scaler's quantiles are taken from (a uniform sample).
SCALER_SAMPLE_ROWS = 500_000
_SCALER_STREAM = 29


@dataclass(frozen=True)
class StreamedTrainOptions:
    """One streamed training run over the rows in `dataset_dir`."""

    dataset_dir: Path
    output: Path = Path("models/bundle")
    seed: int = 0
    holdout_fraction: float = 0.2
    calibration_fraction: float = DEFAULT_CALIBRATION_FRACTION
    network: NetworkConfig = field(default_factory=NetworkConfig)
    epochs: int = 30
    verbose: int | str = "auto"
    max_eval_rows: int = DEFAULT_MAX_EVAL_ROWS

    def __post_init__(self) -> None:
        check_run(self.holdout_fraction, self.calibration_fraction, self.epochs)
        if self.max_eval_rows < 1:
            raise ValueError(f"max_eval_rows must be positive, not {self.max_eval_rows}")


@dataclass(frozen=True)
class LinkSummary:
    """Links with rows (sorted names) and their row and congested-row counts."""

    names: tuple[str, ...]
    rows: np.ndarray
    congested: np.ndarray

    @property
    def prone(self) -> np.ndarray:
        prone: np.ndarray = self.congested >= BUSY_SHARE * np.maximum(self.rows, 1)
        return prone


def train_streamed(
    options: StreamedTrainOptions, log: Callable[[str], None] = print
) -> TrainResult:
    """Split, scale, train, write, calibrate and score the bundle from the Parquet rows
    (module docstring)."""
    started = time.perf_counter()
    description = read_description(options.dataset_dir)
    rows = open_rows(options.dataset_dir)
    links = summarise_links(rows)
    split = split_streamed(links, options)
    train_links = {links.names[i] for i in split.train}
    train_rows = int(links.rows[split.train].sum())
    scaler = fit_scaler_streamed(rows, train_links, train_rows, options.seed)
    dataset_seconds = time.perf_counter() - started
    log(
        f"dataset: {int(links.rows.sum())} rows in {options.dataset_dir}, {len(split.train)}"
        f" training links, {len(split.calibration)} calibration links, {len(split.holdout)}"
        f" held-out links ({dataset_seconds:.0f} s to scan)"
    )
    batches = training_batches(rows, train_links, train_rows, scaler, options.seed)
    started = time.perf_counter()
    model, losses = train_members(
        len(DEFAULT_INPUTS),
        options.network,
        options.seed,
        lambda member: fit_network_batches(member, batches, options.epochs, options.verbose),
    )
    seconds = time.perf_counter() - started
    evaluation = evaluation_rows(rows, links, split, description, options.max_eval_rows)
    card = streamed_card(options, description, links, split, losses, seconds)
    directory = save_bundle(options.output, model, scaler, card)
    add_calibration(directory, evaluation, split)
    return TrainResult(
        directory, add_evaluation(directory, evaluation, split), dataset_seconds, seconds
    )


def split_streamed(links: LinkSummary, options: StreamedTrainOptions) -> LinkSplit:
    """Training, calibration and held-out links (ids into `links.names`), drawn as
    `split_by_family` draws them for one family; refused before training when the links are
    too few for calibration links."""
    split = split_link_ids(
        np.arange(len(links.names)),
        links.prone,
        options.holdout_fraction,
        options.seed,
        options.calibration_fraction,
    )
    if not len(split.calibration):
        raise ValueError(
            f"{len(links.names)} links are too few for calibration links besides the held-out"
            " and training links"
        )
    return split


def _batches(rows: Any, columns: list[str], files: list[str] | None = None) -> Iterator[Any]:
    """pandas frames of `columns`, READ_BATCH_ROWS at a time, file by file."""
    import pyarrow.dataset as ds

    source = rows if files is None else ds.dataset(files, format="parquet")
    for batch in source.to_batches(columns=columns, batch_size=READ_BATCH_ROWS):
        yield batch.to_pandas()


def _link_names(frame: Any) -> Any:
    return frame["source"] + "->" + frame["destination"]


def summarise_links(rows: Any) -> LinkSummary:
    """Per-link row counts and congested rows, in one streamed pass."""
    counts: dict[str, list[int]] = {}
    for frame in _batches(rows, [*_LINK, "utilisation"]):
        frame = frame.assign(link=_link_names(frame), busy=frame["utilisation"] > CONGESTED_RATIO)
        for name, (n, busy) in frame.groupby("link")["busy"].agg(["size", "sum"]).iterrows():
            total = counts.setdefault(name, [0, 0])
            total[0] += int(n)
            total[1] += int(busy)
    if not counts:
        raise ValueError("the dataset has no rows")
    names = tuple(sorted(counts))
    values = np.array([counts[name] for name in names])
    return LinkSummary(names, values[:, 0], values[:, 1])


def fit_scaler_streamed(
    rows: Any, train_links: set[str], train_rows: int, seed: int
) -> MinMaxScaler:
    """`MinMaxScaler.fit_clipped` of a uniform sample of about SCALER_SAMPLE_ROWS training
    rows (quantiles need the rows at hand), drawn in one streamed pass."""
    rng = np.random.default_rng([seed, _SCALER_STREAM])
    keep = min(1.0, SCALER_SAMPLE_ROWS / max(train_rows, 1))
    sample = []
    for frame in _batches(rows, [*_LINK, *DEFAULT_INPUTS]):
        features = frame.loc[_link_names(frame).isin(train_links), list(DEFAULT_INPUTS)]
        values = features.to_numpy(np.float64)
        sample.append(values[rng.random(len(values)) < keep])
    drawn = np.concatenate(sample) if sample else np.zeros((0, len(DEFAULT_INPUTS)))
    if not len(drawn):
        raise ValueError("no training rows")
    offsets = log_offsets(DEFAULT_INPUTS, DEFAULT_INPUT_SCALING)
    return MinMaxScaler.fit_clipped(drawn, DEFAULT_INPUTS, log_offsets=offsets)


def training_batches(
    rows: Any, train_links: set[str], train_rows: int, scaler: MinMaxScaler, seed: int
) -> Any:
    """A tf.data dataset of scaled (features, label) batches of BATCH_SIZE (the last one
    shorter), re-read each epoch; its length is known, so Keras runs every epoch to the end."""
    tf = load_tensorflow()

    files = list(rows.files)
    epochs = iter(range(1 << 30))

    def generate() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        rng = np.random.default_rng([seed, next(epochs)])
        order = [files[i] for i in rng.permutation(len(files))]
        pending: list[tuple[np.ndarray, np.ndarray]] = []
        for frame in _batches(rows, [*_LINK, *DEFAULT_INPUTS, "label"], order):
            frame = frame[_link_names(frame).isin(train_links)]
            shuffled = rng.permutation(len(frame))
            features = scaler.transform(frame[list(DEFAULT_INPUTS)].to_numpy()[shuffled])
            pending.append((features, frame["label"].to_numpy(np.float32)[shuffled]))
            if sum(len(y) for _, y in pending) >= BATCH_SIZE:
                x, y = (np.concatenate(part) for part in zip(*pending, strict=True))
                whole = len(y) - len(y) % BATCH_SIZE
                for start in range(0, whole, BATCH_SIZE):
                    yield x[start : start + BATCH_SIZE], y[start : start + BATCH_SIZE]
                pending = [(x[whole:], y[whole:])]
        if pending and sum(len(y) for _, y in pending):
            yield tuple(np.concatenate(part) for part in zip(*pending, strict=True))  # type: ignore[misc]

    signature = (
        tf.TensorSpec((None, len(DEFAULT_INPUTS)), tf.float32),
        tf.TensorSpec((None,), tf.float32),
    )
    batches = tf.data.Dataset.from_generator(generate, output_signature=signature)
    steps = -(-train_rows // BATCH_SIZE)
    return batches.apply(tf.data.experimental.assert_cardinality(steps)).prefetch(2)


def evaluation_rows(
    rows: Any, links: LinkSummary, split: LinkSplit, description: dict[str, Any], limit: int
) -> Dataset:
    """Held-out rows, calibration rows and a uniform sample of the training rows (each at most
    `limit`: every k-th row beyond) as one Dataset whose link ids index `links.names`."""
    ids = {name: i for i, name in enumerate(links.names)}
    sides = np.zeros(len(links.names), np.int8)  # 0 training, 1 held out, 2 calibration
    sides[split.holdout], sides[split.calibration] = 1, 2
    strides = [max(1, -(-int(links.rows[sides == side].sum()) // limit)) for side in range(3)]
    seen = [0, 0, 0]
    parts: list[dict[str, np.ndarray]] = []
    columns = [*_LINK, "minute", *FEATURE_NAMES, "utilisation", "label", "empirical", "persistence"]
    for frame in _batches(rows, columns):
        link = _link_names(frame).map(ids).to_numpy(np.int32)
        for side in range(3):
            chosen = np.flatnonzero(sides[link] == side)
            keep = chosen[(seen[side] + np.arange(len(chosen))) % strides[side] == 0]
            seen[side] += len(chosen)
            part = {name: frame[name].to_numpy()[keep] for name in columns[2:]}
            parts.append({**part, "link": link[keep]})
    merged = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    return Dataset(
        features=np.column_stack([merged[name] for name in FEATURE_NAMES]).astype(np.float32),
        utilisation=merged["utilisation"].astype(np.float32),
        label=merged["label"].astype(np.float32),
        link=merged["link"],
        minute=merged["minute"].astype(np.int64),
        empirical=merged["empirical"].astype(np.float32),
        persistence=merged["persistence"].astype(np.float32),
        target=str(description.get("target", "nettel")),
        link_names=links.names,
        prone=links.prone,
        description=description,
    )


def streamed_card(
    options: StreamedTrainOptions,
    description: dict[str, Any],
    links: LinkSummary,
    split: LinkSplit,
    losses: list[float],
    seconds: float,
) -> dict[str, Any]:
    """Model card fields of a streamed run (save_bundle adds sha256 and feature_names)."""
    return card_fields(
        kind="real",
        target=str(description.get("target", "nettel")),
        seed=options.seed,
        network=options.network,
        input_scaling=DEFAULT_INPUT_SCALING,
        epochs=options.epochs,
        training_data={
            **description,
            "dataset_dir": str(options.dataset_dir),
            "training": "streamed batches from the day-partitioned Parquet rows",
            "holdout_fraction": options.holdout_fraction,
            "calibration_fraction": options.calibration_fraction,
            "calibration_links": [links.names[i] for i in split.calibration],
            "train_links": len(split.train),
            "train_rows": int(links.rows[split.train].sum()),
            "holdout_rows": int(links.rows[split.holdout].sum()),
            "calibration_rows": int(links.rows[split.calibration].sum()),
            "holdout_links": [links.names[i] for i in split.holdout],
            "evaluation_rows_limit": options.max_eval_rows,
        },
        losses=losses,
        seconds=seconds,
    )
