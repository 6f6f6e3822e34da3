"""`nettel dataset --engine spark`: the training rows of an archive built with PySpark.

The job never re-implements a feature or a parser. Its steps:

1. Read the archive files (``*.jsonl`` and ``*.jsonl.gz`` as text lines, ``*.json`` whole,
   ``*.parquet`` rows) with Spark's file sources (so HDFS and other Hadoop file systems work)
   and turn each record
   into datapoint rows with ``training.perfsonar_archive.convert_records`` (the in-memory reader's
   function: the bus parser or the ps_owd/ps_packetloss converter) in ``mapInPandas``. Refused
   records and datapoints become rows carrying their reject reason.
2. Count the reasons and find the first and last minute (one aggregation).
3. Hash the links into groups of about ``points_per_group`` datapoints (at least as many
   groups as Spark's default parallelism, so every core replays), and in
   ``applyInPandas`` replay each group with ``training.dataset.replay_archive``, the very
   function of the in-memory path: ``LinkState`` ingest minute by minute, ``analyse_links``
   (``service.analysis.features``) at each minute's end, router labels through the map. Links
   are independent in the replay, so a group's rows equal that group's rows of the whole.
4. Write the rows as Parquet partitioned by day (``training.dataset_files`` layout).

Record order (the last of a repeated datapoint wins, as in serving) is kept through each
datapoint's (file path, block start, position in the block, position in the record). Router
files are read by the executors: on a cluster they must be on a file system every executor
mounts (the archive itself may be on HDFS). PySpark is imported only by the functions here.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.analysis.features import FEATURE_NAMES
from service.parse.histogram import HistogramStats
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage
from training.dataset import MappedLink, read_router_map, replay_archive
from training.dataset_files import (
    PARTITION,
    ROW_COLUMNS,
    dataset_columns,
    is_uri,
    prepare_output,
    write_description,
)
from training.gc_pause import gc_paused
from training.perfsonar_archive import (
    RecordOutcome,
    convert_records,
    parse_json_file,
    parse_lines,
)
from training.readers.ps_documents import DOCUMENT_FIELDS

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame, SparkSession

DEFAULT_MASTER = "local[*]"
#: Datapoints replayed together by one Python worker (about 0.5 kB of Python objects each).
DEFAULT_POINTS_PER_GROUP = 400_000
_STATS = ("packets", "mean", "std", "median", "minimum", "p95", "clock_suspect", "dropped")
_POINT_SCHEMA = (
    "file string, block long, seq long, part int, reason string, kind string, "
    "source string, destination string, source_host string, destination_host string, ts long, "
    "packets long, mean double, std double, median double, minimum double, p95 double, "
    "clock_suspect boolean, dropped long, loss double"
)
_ROW_SCHEMA = ", ".join(
    ["source string", "destination string", "minute long"]
    + [f"`{name}` float" for name in FEATURE_NAMES]
    + ["utilisation float", "label float", "empirical float", "persistence float"]
)


@dataclass(frozen=True)
class SparkOptions:
    """Where Spark runs and its settings (`--spark-master`, `--spark-conf key=value`)."""

    master: str = DEFAULT_MASTER
    conf: dict[str, str] = field(default_factory=dict)
    points_per_group: int = DEFAULT_POINTS_PER_GROUP

    def __post_init__(self) -> None:
        if self.points_per_group < 1:
            raise ValueError(f"points per group must be positive, not {self.points_per_group}")


def parse_conf(pairs: list[str]) -> dict[str, str]:
    """`key=value` settings of `--spark-conf`.

    >>> parse_conf(["spark.driver.memory=2g"])
    {'spark.driver.memory': '2g'}
    """
    conf = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"--spark-conf takes key=value, not {pair!r}")
        conf[key.strip()] = value
    return conf


def spark_session(options: SparkOptions) -> SparkSession:
    """A session for the job: UTC, Arrow batches, in local mode this Python for the workers;
    `options.conf` last, so it wins."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(options.master).appName("nettel-dataset")
    defaults = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.sources.partitionOverwriteMode": "static",
    }
    if options.master.startswith("local"):  # workers run this interpreter (venv, nettel)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in {**defaults, **options.conf}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


@dataclass(frozen=True)
class SparkDatasetResult:
    """What the job wrote: rows, and the description stored beside them."""

    rows: int
    description: dict[str, Any]
    seconds: float


def build_spark_dataset(
    spark: SparkSession,
    perfsonar_dir: str | Path,
    router_map: Path,
    output: Path,
    target: str = "nettel",
    points_per_group: int = DEFAULT_POINTS_PER_GROUP,
) -> SparkDatasetResult:
    """Build and write the rows of an archive (module docstring); `output` is replaced."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.perf_counter()
    entries = read_router_map(router_map)
    prepare_output(output)
    points = read_archive_points(spark, str(perfsonar_dir)).persist(StorageLevel.DISK_ONLY)
    try:
        summary = points.groupBy("reason").agg(
            F.count("*").alias("n"), F.min("ts").alias("first"), F.max("ts").alias("last")
        )
        totals = {row["reason"]: row for row in summary.collect()}
        accepted = totals.get(None)
        if accepted is None:
            raise ValueError(f"{perfsonar_dir}: no perfSONAR latency datapoints")
        first = int(accepted["first"]) // 60
        n_minutes = int(accepted["last"]) // 60 - first + 1
        groups = max(
            math.ceil(accepted["n"] / points_per_group), spark.sparkContext.defaultParallelism
        )
        replay = _replay_group(entries, first, n_minutes, target)
        rows = (
            points.where(F.col("reason").isNull())
            .withColumn("group", link_group(groups))
            # a partition per group (not spark.sql.shuffle.partitions): the sort before the
            # day-partitioned write then holds about one group's rows, not a core's share of all
            .repartition(groups, "group")
            .groupBy("group")
            .applyInPandas(replay, schema=_ROW_SCHEMA)
            .withColumn(
                PARTITION, F.date_format(F.timestamp_seconds(F.col("minute") * 60), "yyyy-MM-dd")
            )
        )
        rows.write.mode("overwrite").partitionBy(PARTITION).parquet(str(output))
        written = spark.read.parquet(str(output)).count()
    finally:
        points.unpersist()
    description = {
        "kind": "real",
        "engine": "spark",
        "spark_master": spark.sparkContext.master,
        "perfsonar_dir": str(perfsonar_dir),
        "router_map": str(router_map),
        "datapoints": int(accepted["n"]),
        "rejected": {r: int(v["n"]) for r, v in sorted(totals.items(), key=_key) if r},
        "first_minute": first,
        "minutes": n_minutes,
        "link_groups": groups,
        "target": target,
        "rows": written,
        "persistence": "newest router sample whose interval ended before minute t",
    }
    write_description(output, description)
    return SparkDatasetResult(written, description, time.perf_counter() - started)


def link_group(groups: int) -> Column:
    """The group (0 to `groups` - 1) of the `source`, `destination` link of a row: a hash, so
    all rows of a link are in one group."""
    from pyspark.sql import functions as F

    return F.pmod(F.hash("source", "destination"), F.lit(groups))


def _key(item: tuple[str | None, Any]) -> str:
    return item[0] or ""


def read_archive_points(spark: SparkSession, directory: str) -> DataFrame:
    """Datapoint (and reject) rows of every archive file under `directory`."""
    from pyspark.sql import functions as F

    sources = []
    meta = [
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block"),
    ]
    for pattern, whole, parse in (
        ("*.jsonl", False, _lines_to_points),
        ("*.jsonl.gz", False, _lines_to_points),  # Spark's text reader decompresses
        ("*.json", True, _files_to_points),
    ):
        files = _matching(spark, directory, pattern)
        if files:
            text = spark.read.text(files, wholetext=whole).select("value", *meta)
            sources.append(text.mapInPandas(parse, schema=_POINT_SCHEMA))
    files = _matching(spark, directory, "*.parquet")
    if files:
        frame = spark.read.option("mergeSchema", "true").parquet(*files)  # ps_owd + ps_packetloss
        present = [F.col(f"`{name}`") for name in DOCUMENT_FIELDS if name in frame.columns]
        documents = frame.select(*present, *meta)
        sources.append(documents.mapInPandas(_documents_to_points, schema=_POINT_SCHEMA))
    if not sources:
        raise ValueError(f"{directory}: no *.jsonl(.gz), *.json or *.parquet archive files")
    union = sources[0]
    for other in sources[1:]:
        union = union.unionByName(other)
    return union


def _matching(spark: SparkSession, directory: str, pattern: str) -> list[str]:
    """Files of `directory` matching `pattern` (local paths are listed here; a URI such as
    hdfs://... is listed by Hadoop's glob)."""
    if not is_uri(directory):
        return [str(path) for path in sorted(Path(directory).glob(pattern)) if path.is_file()]
    jvm = spark.sparkContext._jvm  # Hadoop's FileSystem.globStatus, as Spark's readers list
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(f"{directory.rstrip('/')}/{pattern}")
    system = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return [str(status.getPath()) for status in (system.globStatus(path) or [])]


def _lines_to_points(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Datapoint rows of JSON lines, each batch's bus messages parsed together."""
    seq = 0
    for frame in batches:
        frame = frame[frame["value"].str.strip() != ""]
        places = frame[["file", "block"]].itertuples(index=False)
        outcomes = parse_lines(frame["value"].tolist())
        yield _frame(_rows_of(zip(places, outcomes, strict=True), seq))
        seq += len(outcomes)


def _files_to_points(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Datapoint rows of whole ``*.json`` files, each holding any number of records."""
    seq = 0
    for frame in batches:
        placed = [
            ((file, block), outcome)
            for value, file, block in frame[["value", "file", "block"]].itertuples(index=False)
            if value.strip()
            for outcome in parse_json_file(value)
        ]
        yield _frame(_rows_of(placed, seq))
        seq += len(placed)


def _documents_to_points(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Datapoint rows of Parquet export rows (one document each)."""
    seq = 0
    for frame in batches:
        fields = [name for name in frame.columns if name not in ("file", "block")]
        documents = [
            dict(zip(fields, values, strict=True))
            for values in frame[fields].itertuples(index=False, name=None)
        ]
        places = frame[["file", "block"]].itertuples(index=False)
        yield _frame(_rows_of(zip(places, convert_records(documents), strict=True), seq))
        seq += len(documents)


def _rows_of(
    placed: Iterable[tuple[tuple[str, int], RecordOutcome]], first_seq: int
) -> list[tuple[Any, ...]]:
    """Datapoint rows of record outcomes, each at its file and block; `seq` numbers the
    records in partition order from `first_seq` (Spark hands a partition's rows over in file
    order)."""
    rows = []
    for seq, ((file, block), outcome) in enumerate(placed, start=first_seq):
        rows += _outcome_rows(file, block, seq, outcome)
    return rows


def _outcome_rows(file: str, block: int, seq: int, outcome: RecordOutcome) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = [
        (file, block, seq, -1, reason.value, *[None] * 15) for reason in outcome.rejected
    ]
    part = 0
    for message in outcome.messages:
        link = message.link
        ends = (link.source, link.destination, link.source_host, link.destination_host)
        for ts, stats in message.delays:
            rows.append((file, block, seq, part, None, "d", *ends, ts, *stats, None))
            part += 1
        for ts, loss in message.losses:
            rows.append((file, block, seq, part, None, "l", *ends, ts, *[None] * 8, loss))
            part += 1
    return rows


_POINT_COLUMNS = [item.split()[0] for item in _POINT_SCHEMA.split(", ")]


def _frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame.from_records(rows, columns=_POINT_COLUMNS)


def _replay_group(
    entries: list[MappedLink], first: int, n_minutes: int, target: str
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The applyInPandas function: one group of links replayed by the in-memory path's code."""

    def replay(points: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        points = points.sort_values(["file", "block", "seq", "part"], kind="stable")
        with gc_paused():
            messages = group_messages(points)
            dataset = replay_archive(messages, entries, first, n_minutes, target, {})
        columns = dataset_columns(dataset)
        return pd.DataFrame({name: columns[name] for name in ROW_COLUMNS})

    return replay


def group_messages(points: pd.DataFrame) -> list[ParsedMessage]:
    """Single-datapoint messages of datapoint rows, in row order."""
    messages = []
    ends = ["source", "destination", "source_host", "destination_host"]
    stats_columns = [points[name].to_numpy() for name in _STATS]
    kinds = points["kind"].to_numpy()
    timestamps = points["ts"].to_numpy()
    losses = points["loss"].to_numpy()
    links = list(points[ends].itertuples(index=False, name=None))
    for i, kind in enumerate(kinds):
        link = LinkEndpoints(*links[i])
        ts = int(timestamps[i])
        if kind == "d":
            packets, mean, std, median, low, high, suspect, dropped = (c[i] for c in stats_columns)
            stats = HistogramStats(
                int(packets),
                float(mean),
                float(std),
                float(median),
                float(low),
                float(high),
                bool(suspect),
                int(dropped),
            )
            messages.append(ParsedMessage(MeasurementKind.DELAY, link, delays=[(ts, stats)]))
        else:
            messages.append(
                ParsedMessage(MeasurementKind.LOSS, link, losses=[(ts, float(losses[i]))])
            )
    return messages
