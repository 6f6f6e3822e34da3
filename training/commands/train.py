"""`nettel train` and `nettel evaluate`: argparse registration and the run functions.

The `nettel` command finds `add_train_command` and `add_evaluate_command` through the
`nettel.commands` entry points (pyproject.toml). What they run (TensorFlow, scikit-learn and
matplotlib) is imported only when a command runs, so `nettel --help` stays light. Invalid
options and unusable inputs become `ConfigError`, which the CLI prints as a one-line message.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from service.errors import ConfigError, NettelError
from simulation.defaults import DEFAULT_DAYS, DEFAULT_FAMILY, DEFAULT_SITES, FAMILIES
from training.commands.dataset import (
    DEFAULT_DATASET_DIR,
    DEFAULT_TARGET,
    add_engine_options,
    build_dataset_files,
    local_archive,
    local_path,
)
from training.commands.decisions import add_evaluate_decision_options, run_evaluate_decisions

if TYPE_CHECKING:  # scikit-learn and h5py: imported when a command runs
    from service.model.bundle import ModelBundle
    from training.dataset import Dataset
    from training.network import NetworkConfig
    from training.train import TrainOptions
    from training.validation import Transfer

DEFAULT_OUTPUT = Path("models/bundle")
DEFAULT_EVALUATION_DIR = Path("out/evaluation")


def add_train_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    train = subparsers.add_parser(
        "train",
        help="train the utilisation network and write a model bundle",
        description="Build a dataset (simulated mesh by default, or captured perfSONAR messages "
        "with router utilisation), hold out whole links, train, write model.keras + "
        "scaler.json + model_card.json, and score the bundle on the held-out links.",
    )
    _add_data_options(train)
    train.add_argument(
        "--sites", type=int, default=DEFAULT_SITES, help="simulated sites (default %(default)s)"
    )
    train.add_argument(
        "--days", type=float, default=DEFAULT_DAYS, help="simulated days (default %(default)s)"
    )
    train.add_argument("--seed", type=int, default=0, help="seed of mesh, split and network")
    train.add_argument(
        "--family",
        choices=FAMILIES,
        default=DEFAULT_FAMILY,
        help="simulator families: A = M/M/1/K queues, B = fluid FIFO queues with self-similar "
        "traffic, policers, shapers and shared hops, C = packet-level TCP in ns-3 (the committed "
        "capture); several joined with + side by side, mixed = A+B (default %(default)s)",
    )
    train.add_argument(
        "--calibration-fraction",
        type=float,
        default=0.15,
        help="share of links kept from training to calibrate the congestion probability and "
        "the utilisation interval (default 0.15)",
    )
    train.add_argument(
        "--leave-one-family-out",
        action="store_true",
        help="then also train without each simulator family in turn, score every method on the "
        "family left out (out/evaluation/leave-one-family-out) and add the headline to the "
        "model card",
    )
    _add_earlier_bundle_option(train)
    train.add_argument(
        "--validate",
        action="store_true",
        help="write no bundle: score the configuration on validation data only (ROC AUC on each "
        "family's calibration links, and each --transfer), the figures choices are made on "
        "(out/evaluation/validation/validation.json; docs/model.md, section 1)",
    )
    train.add_argument(
        "--transfer",
        type=_transfers,
        default=[],
        metavar="SRC:DST,...",
        help="with --validate: train on family SRC's training links only and score family "
        "DST's links that are not held out, e.g. A:C,C:A (blind to family B)",
    )
    train.add_argument(
        "--holdout-fraction",
        type=float,
        default=0.2,
        help="share of links held out for evaluation (default 0.2)",
    )
    train.add_argument(
        "--widths",
        type=_widths,
        default=(100, 50, 5),
        help="hidden layer widths (default 100,50,5)",
    )
    train.add_argument("--dropout", type=float, default=0.5, help="dropout rate (default 0.5)")
    train.add_argument(
        "--monotone",
        action="store_true",
        help="keep every weight non-negative, so the estimate never falls as an input grows",
    )
    train.add_argument(
        "--ensemble",
        type=int,
        default=1,
        metavar="K",
        help="train K networks from seeds SEED..SEED+K-1 and merge them into one network that"
        " averages their outputs before the output activation (default 1: one network)",
    )
    train.add_argument(
        "--loss",
        choices=("mse", "binary_crossentropy"),
        default="mse",
        help="training loss against the target: squared error (default) or cross-entropy (the "
        "same estimand; keeps learning from rows the sigmoid is confidently wrong about)",
    )
    train.add_argument(
        "--inputs",
        type=_inputs,
        default=None,
        metavar="NAMES",
        help="the network's inputs: newest-minute (the newest minute's five features, default), "
        "all (netTel's 45 smoothed-history features too) or comma-separated feature names",
    )
    train.add_argument(
        "--input-scaling",
        choices=("log", "linear"),
        default="log",
        help="log (default): the newest loss and delays are read as log10(x + offset) before "
        "their clipped min-max bounds (docs/model.md, section 4); linear: as bundles before",
    )
    train.add_argument("--epochs", type=int, default=None, help="training epochs (default 30)")
    train.add_argument(
        "--target",
        choices=("nettel", "ratio"),
        default=None,
        help="label: netTel's (0 at or below 70 %%, the default) or the plain ratio; with "
        "--dataset, the rows' own",
    )
    train.add_argument(
        "--output",
        type=local_path,
        default=DEFAULT_OUTPUT,
        help=f"bundle directory (default {DEFAULT_OUTPUT})",
    )
    train.add_argument("--quiet", action="store_true", help="one line per epoch, no progress bar")
    add_engine_options(train)
    train.add_argument(
        "--dataset-dir",
        type=local_path,
        default=None,
        help="--engine spark: where the Parquet rows are written and streamed from, a local or "
        f"mounted path (default {DEFAULT_DATASET_DIR})",
    )
    train.add_argument(
        "--dataset",
        type=local_path,
        default=None,
        metavar="DIR",
        help="train in streamed batches from the Parquet rows `nettel dataset` wrote to DIR "
        "(either engine's; nothing is built, so no --perfsonar-dir or Spark options)",
    )
    train.set_defaults(run=run_train)


def add_evaluate_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evaluate = subparsers.add_parser(
        "evaluate",
        help="score a model bundle on its held-out links against baselines",
        description="Rebuild the dataset the bundle's card describes, check the held-out links, "
        "and write report.json and PNG plots.",
    )
    evaluate.add_argument(
        "--bundle",
        type=local_path,
        default=DEFAULT_OUTPUT,
        help=f"bundle directory (default {DEFAULT_OUTPUT})",
    )
    evaluate.add_argument(
        "--output",
        type=local_path,
        default=DEFAULT_EVALUATION_DIR,
        help=f"report directory (default {DEFAULT_EVALUATION_DIR})",
    )
    _add_data_options(evaluate, " (replaces the card's paths)")
    evaluate.add_argument(
        "--all-links",
        action="store_true",
        help="score the bundle on every labelled link of --perfsonar-dir/--router-map (links "
        "it never saw): no split, no comparison with the card",
    )
    evaluate.add_argument(
        "--leave-one-family-out",
        action="store_true",
        help="for each simulator family A, B, C: train the bundle's architecture on the other "
        "two and score the network and every baseline on the family left out "
        "(leave_one_family_out.json)",
    )
    _add_earlier_bundle_option(evaluate)
    add_evaluate_decision_options(evaluate)
    evaluate.set_defaults(run=run_evaluate)


def _add_earlier_bundle_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--earlier-bundle",
        type=local_path,
        default=None,
        metavar="DIR",
        help="also score a bundle trained on an earlier feature list (a subset of today's, e.g. "
        "the one shipped before) on the same rows, and the cost it was served with",
    )


def _add_data_options(parser: argparse.ArgumentParser, note: str = "") -> None:
    parser.add_argument(
        "--perfsonar-dir",
        default=None,
        help="real data: perfSONAR archive directory: bus captures (*.jsonl) or ps_owd/"
        "ps_packetloss exports (*.jsonl, *.json, *.parquet); `nettel train --engine spark` "
        f"also reads a Hadoop URI such as hdfs://nn/path{note}",
    )
    parser.add_argument(
        "--router-map",
        type=local_path,
        default=None,
        help=f"real data: JSON map from link to router series{note}",
    )


def _inputs(text: str) -> tuple[str, ...]:
    from service.analysis.features import (
        FEATURE_NAMES,
        NEWEST_FEATURE_NAMES,
        feature_list_problem,
    )

    presets = {"newest-minute": NEWEST_FEATURE_NAMES, "all": FEATURE_NAMES}
    names = presets.get(text) or tuple(name.strip() for name in text.split(",") if name.strip())
    if problem := feature_list_problem(names):
        raise argparse.ArgumentTypeError(
            f"{problem} (newest-minute, all, or names of {FEATURE_NAMES})"
        )
    return names


def _transfers(text: str) -> list[Transfer]:
    from training.validation import Transfer

    try:
        return [Transfer.parse(part) for part in text.split(",")]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _network(args: argparse.Namespace) -> NetworkConfig:
    from training.network import NetworkConfig

    return NetworkConfig(
        widths=args.widths,
        dropout=args.dropout,
        monotone=args.monotone,
        ensemble=args.ensemble,
        loss=args.loss,
    )


def _widths(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers: {text!r}") from None


def run_train(args: argparse.Namespace) -> int:
    if args.engine == "spark" or args.dataset is not None:
        return run_streamed_train(args)
    from training.dataset import DataSource
    from training.evaluate import format_table
    from training.train import DEFAULT_EPOCHS, DEFAULT_INPUTS, TrainOptions, train_bundle

    if args.leave_one_family_out and args.perfsonar_dir is not None:
        raise ConfigError(
            "train: --leave-one-family-out compares simulator families; not for real data"
        )
    if args.transfer and not args.validate:
        raise ConfigError("train: --transfer is a figure of --validate; add --validate")
    if args.validate and (args.leave_one_family_out or args.earlier_bundle is not None):
        raise ConfigError(
            "train: --validate writes no bundle, so neither --leave-one-family-out nor "
            "--earlier-bundle applies"
        )
    try:
        options = TrainOptions(
            source=DataSource(
                args.sites,
                args.days,
                args.seed,
                perfsonar_dir=_archive(args.perfsonar_dir),
                router_map=args.router_map,
                family=args.family,
            ),
            target=args.target or DEFAULT_TARGET,
            holdout_fraction=args.holdout_fraction,
            calibration_fraction=args.calibration_fraction,
            network=_network(args),
            epochs=args.epochs or DEFAULT_EPOCHS,
            output=args.output,
            verbose=2 if args.quiet else "auto",
            inputs=args.inputs or DEFAULT_INPUTS,
            input_scaling=args.input_scaling,
        )
        if args.validate:
            return _validate(options, args.transfer)
        earlier = _earlier(args.earlier_bundle)
        result = train_bundle(options, earlier=earlier)
    except (ValueError, NettelError) as error:
        raise ConfigError(f"train: {error}") from None
    print(f"bundle written to {result.directory} (training {result.training_seconds:.0f} s)")
    print(format_table(result.card["evaluation"]))
    if args.leave_one_family_out:
        output = DEFAULT_EVALUATION_DIR / "leave-one-family-out"
        _leave_one_family_out(args.output, output, earlier, record=True, dataset=result.dataset)
    return 0


def _validate(options: TrainOptions, transfers: list[Transfer]) -> int:
    from training.validation import format_report, validate, write_report

    report = validate(options, options.source.build(options.target), transfers)
    path = write_report(report, DEFAULT_EVALUATION_DIR / "validation")
    print(f"validation report written to {path}")
    print(format_report(report))
    return 0


def _archive(directory: str | None) -> Path | None:
    return None if directory is None else local_archive(directory)


def _earlier(directory: Path | None) -> ModelBundle | None:
    from service.analysis.features import FEATURE_NAMES
    from service.model.bundle import load_bundle

    return None if directory is None else load_bundle(directory, FEATURE_NAMES)


def _leave_one_family_out(
    bundle: Path,
    output: Path,
    earlier: ModelBundle | None,
    record: bool,
    dataset: Dataset | None = None,
) -> None:
    """Run the leave-one-family-out evaluation with the bundle's training options (on the rows
    of `dataset` when they hold every family, else built anew), print its tables; `record` adds
    the headline to the bundle's card."""
    from service.analysis.features import FEATURE_NAMES
    from service.model.bundle import load_bundle
    from training.leave_one_family_out import (
        ALL_FAMILIES,
        evaluate_left_out,
        format_headline,
        leave_one_family_out,
        record_in_card,
    )
    from training.train import options_from_card

    try:
        options = options_from_card(load_bundle(bundle, FEATURE_NAMES).card, output)
        if dataset is not None and dataset.description.get("family") == ALL_FAMILIES:
            report = evaluate_left_out(options, dataset, output, earlier=earlier)
        else:
            report = leave_one_family_out(options, output, earlier=earlier)
        if record:
            record_in_card(bundle, report)
    except (ValueError, KeyError, NettelError) as error:
        raise ConfigError(f"leave-one-family-out evaluation: {error}") from None
    print(f"leave-one-family-out report written to {output}")
    print(format_headline(report))


def run_streamed_train(args: argparse.Namespace) -> int:
    """`nettel train --engine spark` (rows built with Spark) or `--dataset DIR` (rows an earlier
    `nettel dataset` wrote), streamed into Keras."""
    from training.evaluate import format_table
    from training.streamed_training import StreamedTrainOptions, train_streamed
    from training.train import DEFAULT_EPOCHS

    refuse_unused_options(args)
    if args.dataset is None and (args.perfsonar_dir is None or args.router_map is None):
        raise ConfigError(
            "train: --engine spark needs --perfsonar-dir and --router-map (or --dataset DIR)"
        )
    try:
        options = StreamedTrainOptions(
            dataset_dir=args.dataset or args.dataset_dir or DEFAULT_DATASET_DIR,
            output=args.output,
            seed=args.seed,
            holdout_fraction=args.holdout_fraction,
            calibration_fraction=args.calibration_fraction,
            network=_network(args),
            epochs=args.epochs or DEFAULT_EPOCHS,
            verbose=2 if args.quiet else "auto",
        )
        if args.dataset is None:
            target = args.target or DEFAULT_TARGET
            description = build_dataset_files(args, options.dataset_dir, target)
            print(f"dataset: {description['rows']} rows written to {options.dataset_dir} (spark)")
        else:
            check_dataset_target(args.dataset, args.target)
        result = train_streamed(options)
    except (ValueError, OSError, NettelError) as error:
        raise ConfigError(f"train: {error}") from None
    print(f"bundle written to {result.directory} (training {result.training_seconds:.0f} s)")
    print(format_table(result.card["evaluation"]))
    return 0


def refuse_unused_options(args: argparse.Namespace) -> None:
    """Streamed training reads rows of a real archive: the simulator's options, and with
    --dataset those of the build, would be ignored, so they are refused."""
    unused = {
        "--sites": args.sites != DEFAULT_SITES,
        "--days": args.days != DEFAULT_DAYS,
        "--family": args.family != DEFAULT_FAMILY,
        "--leave-one-family-out": args.leave_one_family_out,
        "--earlier-bundle": args.earlier_bundle is not None,
        "--inputs": args.inputs is not None,
        "--validate": args.validate,
        "--transfer": bool(args.transfer),
    }
    if args.dataset is not None:
        unused |= {
            "--perfsonar-dir": args.perfsonar_dir is not None,
            "--router-map": args.router_map is not None,
            "--dataset-dir": args.dataset_dir is not None,
            "--spark-master": args.spark_master is not None,
            "--spark-conf": bool(args.spark_conf),
            "--points-per-group": args.points_per_group is not None,
        }
    given = [flag for flag, used in unused.items() if used]
    if given:
        mode, why = (
            ("--dataset", "its rows are built already, from a real archive")
            if args.dataset is not None
            else ("--engine spark", "it trains on rows of a real archive")
        )
        raise ConfigError(f"train: {mode} cannot honour {', '.join(given)} ({why})")


def check_dataset_target(directory: Path, target: str | None) -> None:
    """Refuse a --target other than the one the rows of `directory` are labelled for."""
    from training.dataset_files import read_description

    labelled = read_description(directory).get("target", DEFAULT_TARGET)
    if target not in (None, labelled):
        raise ValueError(
            f"the rows of {directory} are labelled for --target {labelled}, not {target}"
            f" (build them with `nettel dataset --target {target}`)"
        )


def run_evaluate(args: argparse.Namespace) -> int:
    from training.dataset import DataSource
    from training.evaluate import evaluate_all_links, evaluate_bundle, format_table

    if args.decisions is not None:
        return run_evaluate_decisions(args)
    if args.all_links and (args.perfsonar_dir is None or args.router_map is None):
        raise ConfigError("evaluate: --all-links needs --perfsonar-dir and --router-map")
    try:
        earlier = _earlier(args.earlier_bundle)
        if args.leave_one_family_out:
            _leave_one_family_out(args.bundle, args.output, earlier, record=False)
            return 0
        source = None
        if args.perfsonar_dir or args.router_map:
            source = DataSource(
                perfsonar_dir=_archive(args.perfsonar_dir), router_map=args.router_map
            )
        if args.all_links and source is not None:
            report = evaluate_all_links(args.bundle, args.output, source, earlier)
        else:
            report = evaluate_bundle(args.bundle, args.output, source, earlier)
    except (ValueError, NettelError) as error:
        raise ConfigError(f"evaluate: {error}") from None
    print(f"report and plots written to {args.output}")
    print(format_table(report))
    return 0
