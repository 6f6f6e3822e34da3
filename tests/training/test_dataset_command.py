"""`nettel dataset --engine memory`: day-partitioned Parquet rows plus their description."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")  # the training extra (Parquet)

from service.analysis.features import FEATURE_NAMES  # noqa: E402
from service.cli import main  # noqa: E402
from tests.training.test_dataset import write_capture  # noqa: E402
from tests.training.test_ps_documents import write_router_map  # noqa: E402
from training.dataset import WARMUP_MINUTES, build_real_dataset  # noqa: E402
from training.dataset_files import open_rows, read_description  # noqa: E402


def test_the_memory_engine_writes_the_rows_of_the_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    minutes = WARMUP_MINUTES + 30
    ips, utilisation = write_capture(tmp_path / "perfsonar", minutes)
    router_map = write_router_map(tmp_path, ips, utilisation)
    output = tmp_path / "rows"
    argv = ["dataset", "--perfsonar-dir", str(tmp_path / "perfsonar"), "--router-map"]
    argv += [str(router_map), "--output", str(output), "--target", "ratio"]

    assert main(argv) == 0
    assert main(argv) == 0  # a dataset directory is replaced

    assert capsys.readouterr().out.startswith("60 rows written to")
    rows = open_rows(output).to_table().to_pandas().sort_values(["minute", "source"])
    dataset = build_real_dataset(tmp_path / "perfsonar", router_map, "ratio")
    order = np.lexsort((np.array(dataset.link_names)[dataset.link], dataset.minute))
    np.testing.assert_array_equal(rows[list(FEATURE_NAMES)].to_numpy(), dataset.features[order])
    np.testing.assert_array_equal(rows["label"], dataset.label[order])
    assert set(rows["day"].astype(str)) == {"2024-01-01"}
    description = read_description(output)
    assert (description["engine"], description["rows"], description["target"]) == (
        "memory",
        60,
        "ratio",
    )
    assert description["rejected"] == {}


def test_a_directory_holding_something_else_is_not_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ips, utilisation = write_capture(tmp_path / "perfsonar", WARMUP_MINUTES + 2)
    router_map = write_router_map(tmp_path, ips, utilisation)
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep")
    argv = ["dataset", "--perfsonar-dir", str(tmp_path / "perfsonar"), "--router-map"]
    argv += [str(router_map), "--output", str(tmp_path / "precious")]
    assert main(argv) == 2
    assert "holds no dataset: not overwritten" in capsys.readouterr().err
    assert (tmp_path / "precious" / "notes.txt").read_text() == "keep"
