"""`nettel dataset --engine spark`: the same rows as the in-memory replay, rejects counted by
reason, and `nettel train --dataset` reading its Parquet rows (Spark local mode, one session)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pandas")  # the training extra
pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from service.analysis.features import FEATURE_NAMES  # noqa: E402
from service.cli import main  # noqa: E402
from tests.training.test_dataset import FIRST, write_capture  # noqa: E402
from tests.training.test_ps_documents import write_router_map  # noqa: E402
from training.dataset import WARMUP_MINUTES, build_real_dataset  # noqa: E402
from training.dataset_files import open_rows, read_description, write_dataset  # noqa: E402
from training.streamed_training import summarise_links  # noqa: E402

pytestmark = pytest.mark.slow

#: The capture's first minute: its rows start 300 minutes before a midnight, so they fall on
#: two days (300 and 100 rows per link)
START = FIRST + 1440 - 300
MINUTES = WARMUP_MINUTES + 400  # 2 links: 800 rows
LOSS_TOPIC = "/topic/perfsonar.raw.packet-loss-rate"
MALFORMED = {
    "invalid_json": 3,
    "missing_field": 2,
    "loss_out_of_range": 2,
    "bad_value": 1,
    "clock_error": 1,
}


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from training.spark_dataset import SparkOptions, spark_session

    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        # a JVM this short-lived spends half its CPU in the optimising compiler and GC threads
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    }
    session = spark_session(SparkOptions("local[2]", settings))
    yield session
    session.stop()


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A bus capture plus malformed records in each file layout; the router map."""
    root = tmp_path_factory.mktemp("archive")
    ips, utilisation = write_capture(root / "perfsonar", MINUTES, START)
    bad_lines = [
        "{truncated",
        json.dumps({"destination": LOSS_TOPIC, "body": "[1, 2"}),
        json.dumps({"destination": LOSS_TOPIC, "body": {"x": 1}}),
        json.dumps({"src": ips[0], "dest": ips[1], "timestamp": 5, "packet_loss": 7}),
        json.dumps({"destination": LOSS_TOPIC, "body": {"datapoints": {"60": float("nan")}}}),
    ]
    (root / "perfsonar" / "z-bad.jsonl").write_text("\n".join(bad_lines) + "\n")
    documents = [{"src": "not-an-ip", "dest": ips[1], "timestamp": 5, "packet_loss": 0.1}]
    (root / "perfsonar" / "z-bad.json").write_text(json.dumps(documents + [{"src": ips[0]}]))
    loss = [{"src": ips[0], "dest": ips[1], "timestamp": 60_000, "packet_loss": 1.5}]
    pq.write_table(pa.Table.from_pylist(loss), root / "perfsonar" / "z-bad.parquet")
    # another export, another schema: the job must read both files' columns
    owd = {"src": ips[0], "dest": ips[1], "timestamp": 60_000, "delay_mean": 1e9}
    owd |= {"delay_sd": 0.1, "delay_median": 2.0}
    pq.write_table(pa.Table.from_pylist([owd]), root / "perfsonar" / "z-bad-owd.parquet")
    return root / "perfsonar", write_router_map(root, ips, utilisation, START)


@pytest.fixture(scope="module")
def spark_rows(
    spark: object, archive: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, object]:
    """The archive's rows built by the Spark job (groups of at most 200 datapoints)."""
    from training.spark_dataset import build_spark_dataset

    output = tmp_path_factory.mktemp("spark") / "rows"
    return output, build_spark_dataset(spark, *archive, output, points_per_group=200)


def sorted_rows(directory: Path) -> pd.DataFrame:
    frame = open_rows(directory).to_table().to_pandas()
    frame["day"] = frame["day"].astype(str)
    return frame.sort_values(["source", "destination", "minute"]).reset_index(drop=True)


def test_spark_and_in_memory_engines_write_the_same_rows(
    spark: Any, spark_rows: tuple[Path, Any], archive: tuple[Path, Path], tmp_path: Path
) -> None:
    """Two links with utilisation series of their own, replayed in different groups; one
    datapoint repeated out of order (`write_capture`), so the job's record order decides."""
    from training.spark_dataset import link_group

    directory, result = spark_rows
    dataset = build_real_dataset(*archive)
    write_dataset(dataset, tmp_path / "memory", {**dataset.description, "engine": "memory"})

    memory, distributed = sorted_rows(tmp_path / "memory"), sorted_rows(directory)
    assert len(memory) == result.rows == 2 * (MINUTES - WARMUP_MINUTES) == 800
    groups = result.description["link_groups"]
    assert (result.description["datapoints"], groups) == (1729, 9)  # groups of 200
    links = spark.read.parquet(str(directory)).select("source", "destination").distinct()
    assert len({row[0] for row in links.select(link_group(groups)).collect()}) == 2
    first, second = (link["label"].to_numpy() for _, link in memory.groupby("source"))
    assert not np.array_equal(first, second)  # each link's labels are its own
    np.testing.assert_allclose(
        distributed[list(FEATURE_NAMES)].to_numpy(),
        memory[list(FEATURE_NAMES)].to_numpy(),
        rtol=1e-6,
        atol=1e-6,
    )
    for column in ("source", "destination", "minute", "day", "label", "utilisation"):
        np.testing.assert_array_equal(distributed[column], memory[column])
    np.testing.assert_allclose(distributed["persistence"], memory["persistence"])
    assert sorted(set(memory["day"])) == ["2024-01-01", "2024-01-02"]
    assert (directory / "day=2024-01-01").is_dir()
    assert result.description["rejected"] == dataset.description["rejected"] == MALFORMED
    assert read_description(directory)["engine"] == "spark"


def test_training_from_the_spark_rows_needs_links_for_calibration(
    spark_rows: tuple[Path, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nettel train --dataset` streams the job's rows; two links cannot give training,
    calibration and held-out links, which is refused before training."""
    directory, _ = spark_rows
    assert summarise_links(open_rows(directory)).rows.tolist() == [400, 400]
    argv = ["train", "--dataset", str(directory), "--output", str(tmp_path / "bundle")]
    assert main(argv) == 2
    assert "2 links are too few for calibration links" in capsys.readouterr().err
    assert not (tmp_path / "bundle").exists()
