"""`nettel dataset`: build the training rows of an archive and write them as day-partitioned
Parquet, in memory (`--engine memory`) or with PySpark (`--engine spark`; PySpark is imported
only then). Both engines replay the archive through the service's own ingest and analysis."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from service.errors import ConfigError, NettelError

ENGINES = ("memory", "spark")
DEFAULT_DATASET_DIR = Path("out/dataset")
DEFAULT_TARGET = "nettel"


def add_dataset_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dataset = subparsers.add_parser(
        "dataset",
        help="build training rows from a perfSONAR archive and router series (Parquet by day)",
        description="Replay the perfSONAR archive of --perfsonar-dir through the service's "
        "ingest and analysis, label the rows through --router-map, and write Parquet "
        "partitioned by day plus _dataset.json (docs/spark.md).",
    )
    dataset.add_argument(
        "--perfsonar-dir",
        required=True,
        help="archive directory (--engine spark: also a Hadoop URI such as hdfs://nn/path)",
    )
    dataset.add_argument("--router-map", type=local_path, required=True, help="router map JSON")
    dataset.add_argument(
        "--output",
        type=local_path,
        default=DEFAULT_DATASET_DIR,
        help="dataset directory, a local or mounted path, replaced if it holds a dataset "
        f"(default {DEFAULT_DATASET_DIR})",
    )
    dataset.add_argument("--target", choices=("nettel", "ratio"), default=DEFAULT_TARGET)
    add_engine_options(dataset)
    dataset.set_defaults(run=run_dataset)


def local_path(text: str) -> Path:
    """An argparse type for a file or directory opened on this machine: a URI is refused."""
    from training.dataset_files import is_uri

    if is_uri(text):
        raise argparse.ArgumentTypeError(f"{text} is a URI: give a local or mounted path")
    return Path(text)


def local_archive(directory: str) -> Path:
    """The --perfsonar-dir of an in-memory build, which reads local (or mounted) files only."""
    from training.dataset_files import is_uri

    if is_uri(directory):
        raise ValueError(
            f"--perfsonar-dir {directory}: only --engine spark reads an archive from a URI"
            " (mount it to read it in this process)"
        )
    return Path(directory)


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="memory",
        help="build the rows in this process (memory, default) or with PySpark (spark)",
    )
    parser.add_argument(
        "--spark-master",
        default=None,
        help="Spark master URL for --engine spark (default local[*]; e.g. yarn, spark://h:7077)",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Spark setting for --engine spark (repeatable), e.g. spark.driver.memory=4g",
    )
    parser.add_argument(
        "--points-per-group",
        type=int,
        default=None,
        help="--engine spark: datapoints replayed together by one Python worker (default 400000)",
    )


def build_dataset_files(args: argparse.Namespace, output: Path, target: str) -> dict[str, object]:
    """Write the rows (labelled for `target`) with the chosen engine; the dataset description."""
    if args.engine == "spark":
        from training.spark_dataset import (
            DEFAULT_MASTER,
            DEFAULT_POINTS_PER_GROUP,
            SparkOptions,
            build_spark_dataset,
            parse_conf,
            spark_session,
        )

        options = SparkOptions(
            args.spark_master or DEFAULT_MASTER,
            parse_conf(args.spark_conf),
            args.points_per_group or DEFAULT_POINTS_PER_GROUP,
        )
        spark = spark_session(options)
        try:
            result = build_spark_dataset(
                spark,
                args.perfsonar_dir,
                args.router_map,
                output,
                target,
                options.points_per_group,
            )
        finally:
            spark.stop()
        return result.description
    from training.dataset import build_real_dataset
    from training.dataset_files import write_dataset

    dataset = build_real_dataset(local_archive(args.perfsonar_dir), args.router_map, target)
    description = {**dataset.description, "engine": "memory"}
    write_dataset(dataset, output, description)
    return {**description, "rows": len(dataset)}


def run_dataset(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    try:
        description = build_dataset_files(args, args.output, args.target)
    except (ValueError, OSError, NettelError) as error:
        raise ConfigError(f"dataset: {error}") from None
    seconds = time.perf_counter() - started
    print(f"{description['rows']} rows written to {args.output} in {seconds:.1f} s")
    print(json.dumps({k: description[k] for k in ("rejected", "first_minute", "minutes")}))
    return 0
