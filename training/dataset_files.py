"""Training rows on disk: Parquet partitioned by day, the layout `nettel dataset` writes.

``<directory>/day=YYYY-MM-DD/*.parquet`` hold one row per (link, minute): ``source``,
``destination`` (the link's IPs), ``minute`` (epoch minute), the 50 features under their
FEATURE_NAMES, ``utilisation`` (true ratio), ``label`` (its target form), ``empirical`` (the
filter's score) and ``persistence``; ``<directory>/_dataset.json`` describes the source (the
dataset description of the model card, plus the engine). Both engines write this layout, and
streamed training reads it batch by batch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from service.analysis.features import FEATURE_NAMES

if TYPE_CHECKING:  # the CLI imports this module (is_uri): the replay stays unimported
    from training.dataset import Dataset

DESCRIPTION_FILE = "_dataset.json"  # "_": Parquet readers skip it
LINK_COLUMNS = ("source", "destination")
VALUE_COLUMNS = ("utilisation", "label", "empirical", "persistence")
ROW_COLUMNS = (*LINK_COLUMNS, "minute", *FEATURE_NAMES, *VALUE_COLUMNS)
PARTITION = "day"


def day_of_minute(minutes: np.ndarray) -> np.ndarray:
    """UTC day (YYYY-MM-DD) of epoch minutes, the partition value.

    >>> day_of_minute(np.array([28_401_120, 28_402_559])).tolist()
    ['2024-01-01', '2024-01-01']
    """
    days = (np.asarray(minutes, np.int64) // 1440).astype("datetime64[D]")
    return np.datetime_as_string(days, unit="D")


def is_uri(path: str | Path) -> bool:
    """Whether `path` names its file system by scheme (hdfs://..., s3a://..., file://...):
    only Spark's readers open those; everything else here needs a local or mounted path.

    >>> is_uri("hdfs://nn:8020/monit/perfsonar"), is_uri("archive/2024-01")
    (True, False)
    """
    return "://" in str(path)


def dataset_columns(dataset: Dataset) -> dict[str, np.ndarray]:
    """The row columns of an in-memory dataset (ROW_COLUMNS order)."""
    ends = [name.split("->") for name in dataset.link_names]
    sources = np.array([s for s, _ in ends], dtype=object)
    destinations = np.array([d for _, d in ends], dtype=object)
    columns: dict[str, np.ndarray] = {
        "source": sources[dataset.link],
        "destination": destinations[dataset.link],
        "minute": dataset.minute.astype(np.int64),
    }
    for index, name in enumerate(FEATURE_NAMES):
        columns[name] = dataset.features[:, index]
    for name in VALUE_COLUMNS:
        columns[name] = getattr(dataset, name).astype(np.float32)
    return columns


def write_dataset(dataset: Dataset, directory: Path, description: dict[str, Any]) -> int:
    """Write `dataset` as day-partitioned Parquet plus its description; returns the rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    prepare_output(directory)
    columns = dataset_columns(dataset)
    columns[PARTITION] = day_of_minute(columns["minute"])
    pq.write_to_dataset(pa.table(columns), directory, partition_cols=[PARTITION])
    write_description(directory, {**description, "rows": len(dataset)})
    return len(dataset)


def prepare_output(directory: Path) -> None:
    """An empty output directory: a previous dataset there (its description file says so) is
    replaced; any other non-empty directory is refused rather than overwritten."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        if not (directory / DESCRIPTION_FILE).is_file():
            raise ValueError(f"{directory} is not empty and holds no dataset: not overwritten")
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)


def write_description(directory: Path, description: dict[str, Any]) -> None:
    (Path(directory) / DESCRIPTION_FILE).write_text(json.dumps(description, indent=2) + "\n")


def read_description(directory: Path) -> dict[str, Any]:
    path = Path(directory) / DESCRIPTION_FILE
    if not path.is_file():
        raise ValueError(
            f"{directory}: no {DESCRIPTION_FILE}: not a dataset `nettel dataset` wrote"
        )
    description: dict[str, Any] = json.loads(path.read_text())
    return description


def open_rows(directory: Path) -> Any:
    """The rows as a pyarrow dataset (day partitions as a column)."""
    import pyarrow.dataset as ds

    read_description(directory)
    return ds.dataset(Path(directory), format="parquet", partitioning="hive")
