"""`nettel train` and `nettel evaluate`: argparse registration and the run functions.

`service/cli.py` (the composition root) calls `add_train_command(subparsers)` and
`add_evaluate_command(subparsers)`. TensorFlow, scikit-learn and matplotlib are imported only
when a command runs, so `nettel --help` and `nettel serve` stay light. Invalid options and
unusable inputs become `ConfigError`, which the CLI prints as a one-line message.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from service.errors import ConfigError, NettelError

DEFAULT_OUTPUT = Path("models/bundle")
DEFAULT_EVALUATION_DIR = Path("out/evaluation")


def add_train_command(subparsers: argparse._SubParsersAction) -> None:
    train = subparsers.add_parser(
        "train",
        help="train the utilisation network and write a model bundle",
        description="Build a dataset (simulated mesh by default, or captured perfSONAR messages "
        "with router utilisation), hold out whole links, train, write model.keras + "
        "scaler.json + model_card.json, and score the bundle on the held-out links.",
    )
    _add_data_options(train)
    train.add_argument("--sites", type=int, default=20, help="simulated sites (default 20)")
    train.add_argument("--days", type=float, default=3.0, help="simulated days (default 3)")
    train.add_argument("--seed", type=int, default=0, help="seed of mesh, split and network")
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
    train.add_argument("--epochs", type=int, default=None, help="training epochs (default 30)")
    train.add_argument(
        "--target",
        choices=("nettel", "ratio"),
        default="nettel",
        help="label: netTel's (0 at or below 70 %%) or the plain ratio",
    )
    train.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"bundle directory (default {DEFAULT_OUTPUT})",
    )
    train.add_argument("--quiet", action="store_true", help="one line per epoch, no progress bar")
    train.set_defaults(run=run_train)


def add_evaluate_command(subparsers: argparse._SubParsersAction) -> None:
    evaluate = subparsers.add_parser(
        "evaluate",
        help="score a model bundle on its held-out links against baselines",
        description="Rebuild the dataset the bundle's card describes, check the held-out links, "
        "and write report.json and PNG plots.",
    )
    evaluate.add_argument(
        "--bundle",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"bundle directory (default {DEFAULT_OUTPUT})",
    )
    evaluate.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_EVALUATION_DIR,
        help=f"report directory (default {DEFAULT_EVALUATION_DIR})",
    )
    _add_data_options(evaluate, " (replaces the card's paths)")
    evaluate.set_defaults(run=run_evaluate)


def _add_data_options(parser: argparse.ArgumentParser, note: str = "") -> None:
    parser.add_argument(
        "--perfsonar-dir",
        type=Path,
        default=None,
        help=f"real data: directory of captured bus messages (*.jsonl){note}",
    )
    parser.add_argument(
        "--router-map",
        type=Path,
        default=None,
        help=f"real data: JSON map from link to router series{note}",
    )


def _widths(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers: {text!r}") from None


def run_train(args: argparse.Namespace) -> int:
    from models.network import NetworkConfig
    from training.dataset import DataSource
    from training.evaluate import format_table
    from training.train import DEFAULT_EPOCHS, TrainOptions, train_bundle

    try:
        options = TrainOptions(
            source=DataSource(
                args.sites,
                args.days,
                args.seed,
                perfsonar_dir=args.perfsonar_dir,
                router_map=args.router_map,
            ),
            target=args.target,
            holdout_fraction=args.holdout_fraction,
            network=NetworkConfig(widths=args.widths, dropout=args.dropout),
            epochs=args.epochs or DEFAULT_EPOCHS,
            output=args.output,
            verbose=2 if args.quiet else "auto",
        )
        result = train_bundle(options)
    except (ValueError, NettelError) as error:
        raise ConfigError(f"train: {error}") from None
    print(f"bundle written to {result.directory} (training {result.training_seconds:.0f} s)")
    print(format_table(result.card["evaluation"]))
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from training.dataset import DataSource
    from training.evaluate import evaluate_bundle, format_table

    try:
        source = None
        if args.perfsonar_dir or args.router_map:
            source = DataSource(perfsonar_dir=args.perfsonar_dir, router_map=args.router_map)
        report = evaluate_bundle(args.bundle, args.output, source)
    except (ValueError, NettelError) as error:
        raise ConfigError(f"evaluate: {error}") from None
    print(f"report and plots written to {args.output}")
    print(format_table(report))
    return 0
