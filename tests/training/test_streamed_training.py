"""Streamed training (`nettel train --engine spark` / `--dataset DIR`) from Parquet rows: the
split with calibration links, the calibrated bundle, and the command's options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.training.needs_keras import skip_without_keras  # noqa: E402

skip_without_keras()
pytest.importorskip("sklearn")
pytest.importorskip("pyarrow")
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("error:Your input ran out of data"),  # every epoch runs to its end
]

from service.analysis.features import FEATURE_NAMES  # noqa: E402
from service.cli import build_parser, main  # noqa: E402
from service.model.bundle import load_bundle  # noqa: E402
from training.dataset import build_simulated_dataset  # noqa: E402
from training.dataset_files import open_rows, read_description, write_dataset  # noqa: E402
from training.network import NetworkConfig  # noqa: E402
from training.streamed_training import (  # noqa: E402
    StreamedTrainOptions,
    evaluation_rows,
    split_streamed,
    summarise_links,
    train_streamed,
)
from training.train import TrainResult  # noqa: E402

TINY_NETWORK = NetworkConfig(widths=(16, 8, 4), dropout=0.1)
ROWS = 12 * 72  # 4 sites: 12 links, 72 minutes each


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The day-partitioned rows of a 4-site simulated mesh, as `nettel dataset` writes them."""
    dataset = build_simulated_dataset(sites=4, days=0.05, seed=2)
    directory = tmp_path_factory.mktemp("rows") / "rows"
    write_dataset(dataset, directory, {**dataset.description, "engine": "memory"})
    return directory


@pytest.fixture(scope="module")
def options(rows: Path, tmp_path_factory: pytest.TempPathFactory) -> StreamedTrainOptions:
    output = tmp_path_factory.mktemp("streamed") / "bundle"
    return StreamedTrainOptions(
        dataset_dir=rows, output=output, seed=2, network=TINY_NETWORK, epochs=2, verbose=0
    )


@pytest.fixture(scope="module")
def result(options: StreamedTrainOptions) -> TrainResult:
    return train_streamed(options, log=lambda _: None)


def test_training_calibration_and_held_out_links_are_disjoint(
    options: StreamedTrainOptions, result: TrainResult
) -> None:
    links = summarise_links(open_rows(options.dataset_dir))
    split = split_streamed(links, options)
    sides = [set(split.train), set(split.calibration), set(split.holdout)]
    assert all(sides) and sum(map(len, sides)) == len(set.union(*sides)) == len(links.names) == 12
    data = result.card["training_data"]
    assert data["calibration_links"] == [links.names[i] for i in split.calibration]
    assert data["holdout_links"] == [links.names[i] for i in split.holdout]
    assert data["train_links"] == len(split.train)
    assert data["train_rows"] + data["calibration_rows"] + data["holdout_rows"] == ROWS


def test_the_streamed_bundle_is_calibrated_on_its_calibration_links(result: TrainResult) -> None:
    bundle = load_bundle(result.directory, FEATURE_NAMES)
    assert bundle.calibration is not None and bundle.card == result.card
    data = result.card["training_data"]
    assert (data["engine"], data["calibration_fraction"]) == ("memory", 0.15)
    assert result.card["calibration"]["fitted_on"] == {
        "links": len(data["calibration_links"]),
        "rows": data["calibration_rows"],
    }
    evaluation = result.card["evaluation"]
    assert evaluation["rows"] == data["holdout_rows"]
    assert set(evaluation["metrics"]) >= {"model", "linear_regression", "logistic_regression"}


def test_evaluation_rows_keep_every_side_bounded(options: StreamedTrainOptions) -> None:
    rows = open_rows(options.dataset_dir)
    links = summarise_links(rows)
    split = split_streamed(links, options)
    description = read_description(options.dataset_dir)
    every = evaluation_rows(rows, links, split, description, ROWS)
    bounded = evaluation_rows(rows, links, split, description, 50)
    for ids in (split.train, split.calibration, split.holdout):
        assert np.isin(every.link, ids).sum() == links.rows[ids].sum()
        assert 0 < np.isin(bounded.link, ids).sum() <= 50


def test_train_dataset_trains_from_the_rows_without_building(
    rows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "bundle"
    argv = ["train", "--dataset", str(rows), "--calibration-fraction", "0.2", "--widths", "8,4,2"]
    assert main([*argv, "--epochs", "1", "--quiet", "--output", str(bundle)]) == 0
    assert "| model |" in capsys.readouterr().out
    card = load_bundle(bundle, FEATURE_NAMES).card
    assert card["training_data"]["dataset_dir"] == str(rows)
    assert card["training_data"]["calibration_fraction"] == 0.2
    assert "fitted_on" in card["calibration"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--perfsonar-dir", "archive"], "--dataset cannot honour --perfsonar-dir"),
        (["--points-per-group", "10", "--spark-conf", "a=b"], "--spark-conf, --points-per-group"),
        (["--target", "ratio"], "labelled for --target nettel, not ratio"),
        (["--calibration-fraction", "0.9"], "calibration fraction must be in (0, 0.8)"),
        (
            ["--family", "B", "--leave-one-family-out"],
            "cannot honour --family, --leave-one-family-out",
        ),
    ],
)
def test_train_dataset_refuses_what_it_cannot_honour(
    rows: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    bundle = tmp_path / "bundle"
    assert main(["train", "--dataset", str(rows), *argv, "--output", str(bundle)]) == 2
    assert message in capsys.readouterr().err
    assert not bundle.exists()


def test_engine_spark_refuses_simulator_options_before_building(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--engine", "spark", "--perfsonar-dir", "hdfs://nn:8020/archive"]
    argv += ["--router-map", str(tmp_path / "map.json"), "--family", "mixed", "--sites", "5"]
    assert main(argv) == 2
    assert "--engine spark cannot honour --sites, --family" in capsys.readouterr().err


def test_an_archive_uri_is_kept_for_spark_and_refused_in_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--engine", "spark", "--perfsonar-dir", "hdfs://nn:8020/archive"]
    args = build_parser().parse_args(argv)
    assert args.perfsonar_dir == "hdfs://nn:8020/archive"
    argv = ["train", "--perfsonar-dir", "hdfs://nn:8020/archive", "--router-map", "map.json"]
    assert main(argv) == 2
    assert "only --engine spark reads an archive from a URI" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--dataset", "--dataset-dir", "--output", "--router-map"])
def test_paths_read_or_written_here_refuse_a_uri(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", option, "hdfs://nn:8020/rows"])
    assert "hdfs://nn:8020/rows is a URI: give a local or mounted path" in capsys.readouterr().err
