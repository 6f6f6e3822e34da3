"""Leave-one-family-out evaluation on tiny meshes of families A and B and the small ns-3 capture
of family C (tests/data/family-c-small)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.training.needs_keras import skip_without_keras  # noqa: E402

skip_without_keras()
pytest.importorskip("sklearn")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from service.model.bundle import CARD_FILE  # noqa: E402
from tests.data import DATA  # noqa: E402
from training.dataset import Dataset, DataSource, family_links  # noqa: E402
from training.evaluate import BUSY_ABOVE  # noqa: E402
from training.leave_one_family_out import (  # noqa: E402
    BASELINES,
    REPORT_FILE,
    evaluate_left_out,
    format_headline,
    record_in_card,
)
from training.network import NetworkConfig  # noqa: E402
from training.train import TrainOptions  # noqa: E402

SMALL_C = DATA / "family-c-small"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Dataset, dict[str, Any]]:
    root = tmp_path_factory.mktemp("lofo")
    options = TrainOptions(
        source=DataSource(sites=3, days=0.1, seed=3, family="A+B+C", family_c_capture=SMALL_C),
        network=NetworkConfig(widths=(8, 4, 2), dropout=0.1),
        epochs=1,
        output=root / "bundle",
        verbose=0,
    )
    dataset = options.source.build(options.target)
    report = evaluate_left_out(options, dataset, root / "report", log=lambda _: None)
    return root, dataset, report


def test_each_family_is_scored_whole_by_networks_that_never_saw_it(
    run: tuple[Path, Dataset, dict[str, Any]],
) -> None:
    root, dataset, report = run
    families = family_links(dataset)
    assert set(report["results"]) == set(families) == {"A", "B", "C"}
    for family, links in families.items():
        assert report["results"][family]["rows"] == len(dataset.rows_of(links))
        card = json.loads((root / "report" / f"without-{family}" / CARD_FILE).read_text())
        seen = set(card["training_data"]["calibration_links"])
        assert not seen & set(dataset.names_of(links))  # the left-out family calibrates nothing
        assert card["training_data"]["left_out_family"] == family
        assert card["training_data"]["holdout_links"] == dataset.names_of(links)
    written = json.loads((root / "report" / REPORT_FILE).read_text())
    assert written["headline"] == report["headline"]


def test_the_headline_compares_the_network_with_every_baseline(
    run: tuple[Path, Dataset, dict[str, Any]],
) -> None:
    _, _, report = run
    for row in report["headline"].values():
        assert set(BASELINES) | {"model", "persistence"} <= set(row["roc_auc"])
        best = max(row["roc_auc"][name] or 0.0 for name in BASELINES)
        assert row["network_at_or_above_every_baseline"] == (row["roc_auc"]["model"] >= best)
        assert set(row["cost"]) == {"model", "filter_floor"}
        ece = row["expected_calibration_error"]
        assert row["expected_calibration_error_target"] == 0.05
        assert row["expected_calibration_error_over_target"] == round(max(ece - 0.05, 0.0), 4)
    table = format_headline(report)
    assert "| ECE over 0.05 by |" in table
    assert "| gradient_boosting |" in table
    assert table.splitlines()[0] == "| method | A left out | B left out | C left out |"


def test_family_c_rows_are_the_ns3_links_with_their_counters(
    run: tuple[Path, Dataset, dict[str, Any]],
) -> None:
    _, dataset, report = run
    c = dataset.rows_of(family_links(dataset)["C"])
    assert dataset.description["families"]["C"]["capture"] == "tests/data/family-c-small"
    assert 0.0 <= float(c.utilisation.min()) and float(c.utilisation.max()) <= 1.0 + 1e-6
    busy = report["results"]["C"]["cost"]["model"]["busy_rows"]
    assert busy == int(np.sum(c.utilisation > BUSY_ABOVE))


def test_the_headline_goes_into_the_card(run: tuple[Path, Dataset, dict[str, Any]]) -> None:
    root, _, report = run
    bundle = root / "report" / "without-A"
    record_in_card(bundle, report)
    card = json.loads((bundle / CARD_FILE).read_text())
    assert card["leave_one_family_out"] == report["headline"]
