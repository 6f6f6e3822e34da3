"""Cross-family evaluation of a bundle trained on one simulator family (tiny runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("models.network")  # Keras, after its TensorFlow settings
pytest.importorskip("sklearn")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from models.bundle import CARD_FILE  # noqa: E402
from models.network import NetworkConfig  # noqa: E402
from training.cross_family import (  # noqa: E402
    REPORT_FILE,
    TEST_FAMILIES,
    TRAINING_SETS,
    cross_family_evaluation,
    format_headline,
    record_in_card,
)
from training.dataset import DataSource  # noqa: E402
from training.train import TrainOptions, train_bundle  # noqa: E402


@pytest.fixture(scope="module")
def family_a_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A bundle trained on family A alone, then its cross-family report."""
    root = tmp_path_factory.mktemp("cross")
    options = TrainOptions(
        source=DataSource(sites=4, days=0.1, seed=3, family="A"),
        network=NetworkConfig(widths=(16, 8, 4), dropout=0.1),
        epochs=2,
        output=root / "bundle",
        verbose=0,
    )
    bundle = train_bundle(options, log=lambda _: None).directory
    return bundle, cross_family_evaluation(bundle, root / "report", log=lambda _: None)


def test_a_family_a_bundle_is_scored_against_b_and_mixed_models(
    family_a_run: tuple[Path, dict[str, Any]],
) -> None:
    bundle, report = family_a_run
    assert report["bundle_family"] == "A"
    assert set(report["results"]) == set(TRAINING_SETS)
    for training_set in TRAINING_SETS:
        assert set(report["results"][training_set]) == set(TEST_FAMILIES)
        for tested in report["results"][training_set].values():
            assert tested["rows"] > 0 and "model" in tested["metrics"]
    trained = {path.name for path in (bundle.parent / "report").iterdir() if path.is_dir()}
    assert trained == {"trained-on-B", "trained-on-mixed"}  # A is the bundle itself
    written = json.loads((bundle.parent / "report" / REPORT_FILE).read_text())
    assert written["headline"] == report["headline"]


def test_the_bundle_itself_stands_for_its_own_family(
    family_a_run: tuple[Path, dict[str, Any]],
) -> None:
    """A on A is the bundle on its own held-out links: the card's own evaluation figures."""
    bundle, report = family_a_run
    card = json.loads((bundle / CARD_FILE).read_text())
    own = card["evaluation"]["families"]["A"]
    assert report["results"]["A"]["A"]["rows"] == own["rows"]
    assert report["results"]["A"]["A"]["metrics"]["model"] == own["metrics"]["model"]


def test_the_headline_gives_drops_for_fitted_methods_and_is_recorded_in_the_card(
    family_a_run: tuple[Path, dict[str, Any]],
) -> None:
    bundle, report = family_a_run
    model = report["headline"]["roc_auc"]["model"]
    assert model["drop_A_to_B"] == pytest.approx(model["A->A"] - model["A->B"])
    assert report["headline"]["roc_auc"]["empirical"]["drop_A_to_B"] is None
    assert "| model |" in format_headline(report)
    record_in_card(bundle, report)
    card = json.loads((bundle / CARD_FILE).read_text())
    assert card["cross_family"]["roc_auc"] == report["headline"]["roc_auc"]
    assert card["cross_family"]["training_sets"] == list(TRAINING_SETS)
