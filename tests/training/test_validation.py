"""`nettel train --validate`: figures for choosing a configuration that read no held-out link,
and transfers between families that leave a third family unseen."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.training.needs_keras import skip_without_keras  # noqa: E402

skip_without_keras()
pytest.importorskip("sklearn")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from service.cli import main  # noqa: E402
from tests.data import DATA  # noqa: E402
from training.dataset import DataSource, LinkSplit, family_links  # noqa: E402
from training.network import NetworkConfig  # noqa: E402
from training.train import TrainOptions, split_dataset  # noqa: E402
from training.validation import Transfer, format_report, transfer_links, validate  # noqa: E402


def test_a_transfer_trains_on_the_source_and_scores_the_destination_without_held_out_links() -> (
    None
):
    families = {"A": np.arange(0, 6), "B": np.arange(6, 10), "C": np.arange(10, 15)}
    split = LinkSplit(
        train=np.array([0, 1, 2, 6, 7, 10, 11, 12]),
        holdout=np.array([3, 8, 13]),
        calibration=np.array([4, 5, 9, 14]),
    )
    train, scored = transfer_links(split, families, Transfer("A", "C"))
    assert train.tolist() == [0, 1, 2]
    assert scored.tolist() == [10, 11, 12, 14]  # C's training and calibration links, not 13
    with pytest.raises(ValueError, match="no family D"):
        transfer_links(split, families, Transfer("A", "D"))


@pytest.mark.parametrize("text", ["A", "A:A", ":C", "A:"])
def test_a_transfer_names_two_different_families(text: str) -> None:
    with pytest.raises(ValueError, match="SRC:DST"):
        Transfer.parse(text)


def test_validation_scores_calibration_links_and_transfers_only() -> None:
    options = TrainOptions(
        source=DataSource(
            sites=3, days=0.1, seed=3, family="A+B+C", family_c_capture=DATA / "family-c-small"
        ),
        network=NetworkConfig(widths=(8, 4, 2), dropout=0.1),
        epochs=1,
        verbose=0,
    )
    dataset = options.source.build(options.target)
    split = split_dataset(dataset, options)
    families = family_links(dataset)
    report = validate(options, dataset, [Transfer("A", "C"), Transfer("C", "A")], log=print)
    for family, links in families.items():
        figures = report["in_family_calibration_links"][family]
        calibration = np.intersect1d(links, split.calibration)
        assert figures["rows"] == len(dataset.rows_of(calibration)) > 0
    c_not_held = np.setdiff1d(families["C"], split.holdout)
    assert report["transfer"]["A->C"]["rows"] == len(dataset.rows_of(c_not_held))
    assert report["transfer"]["A->C"]["trained_on"] == "A"
    assert "transfer A->C (trained on A only): ROC AUC" in format_report(report)
    assert report["configuration"]["monotone"] is False
    json.dumps(report)  # written as JSON


def test_validate_refuses_what_it_cannot_honour(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--transfer", "A:C"]) == 2
    assert "--transfer is a figure of --validate" in capsys.readouterr().err
    assert main(["train", "--validate", "--leave-one-family-out"]) == 2
    assert "--validate writes no bundle" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse's usage error
        main(["train", "--validate", "--transfer", "A:A"])
    assert "SRC:DST of two different families, not 'A:A'" in capsys.readouterr().err


def test_validate_writes_no_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--validate", "--family", "A", "--sites", "3", "--days", "0.1"]
    assert main([*argv, "--widths", "4,2", "--epochs", "1", "--quiet"]) == 0
    report = json.loads((tmp_path / "out/evaluation/validation/validation.json").read_text())
    assert set(report["in_family_calibration_links"]) == {"A"}
    assert not (tmp_path / "models").exists()
