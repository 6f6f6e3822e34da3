"""Writes model bundles (the layout `service.model.bundle` reads), from a trained Keras model."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from service.analysis.calibration import Calibration
from service.model.bundle import CALIBRATION_FILE, CARD_FILE, MODEL_FILE, SCALER_FILE, file_sha256
from service.model.scaler import MinMaxScaler


def save_bundle(
    directory: Path,
    keras_model: Any,
    scaler: MinMaxScaler,
    card_fields: dict[str, Any],
    calibration: Calibration | None = None,
) -> Path:
    """Write model.keras, scaler.json, calibration.json (if given) and model_card.json into
    `directory`; return it.

    The card is `card_fields` plus the sha256 of the written model.keras and the scaler's
    feature names (`created` defaults to now, ISO UTC). It is written last, so an interrupted
    save leaves a bundle that `load_bundle` refuses.
    """
    if keras_model.input_shape[-1] != len(scaler.feature_names):
        raise ValueError("the model's input width differs from the scaler's feature count")
    missing = {"name", "version"} - set(card_fields)
    if missing:
        raise ValueError(f"card fields lack {sorted(missing)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    keras_model.save(directory / MODEL_FILE)
    (directory / SCALER_FILE).write_text(json.dumps(scaler.to_json(), indent=1) + "\n")
    card = {"created": datetime.now(UTC).isoformat(timespec="seconds"), **card_fields}
    (directory / CALIBRATION_FILE).unlink(missing_ok=True)
    if calibration is not None:
        card["calibration"] = write_calibration(directory, calibration)
    card |= {
        "sha256": file_sha256(directory / MODEL_FILE),
        "feature_names": list(scaler.feature_names),
    }
    (directory / CARD_FILE).write_text(json.dumps(card, indent=2) + "\n")
    return directory


def write_calibration(directory: Path, calibration: Calibration) -> dict[str, Any]:
    """Write calibration.json; return the card's `calibration` entry (file, sha256, coverage)."""
    path = Path(directory) / CALIBRATION_FILE
    path.write_text(json.dumps(calibration.to_json(), indent=1) + "\n")
    return {
        "file": CALIBRATION_FILE,
        "sha256": file_sha256(path),
        "kind": calibration.to_json()["kind"],
        "event": calibration.event,
        "interval_coverage": calibration.coverage,
    }
