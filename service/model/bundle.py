"""Model bundles: `model.keras` + `scaler.json` + `model_card.json` (+ `calibration.json`).

Loading needs numpy and h5py only (see service.model.numpy_network); the card's sha256 must
match the `.keras` file and every feature it names must be one the service computes, or the
bundle is refused. A bundle reads its own features (a subset of the service's, in its own
order) out of the service's feature rows by name, so bundles of different inputs serve alike.
A card naming a calibration must hold its sha256 and the file must parse
(`service.analysis.calibration.Calibration.from_json`), or the bundle is refused; a bundle whose
card names none (trained before calibration existed) loads with `calibration` None, logged, and
serves null congestion probabilities and intervals. Saving is training's
(`training.bundle_writer`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from service.analysis.calibration import Calibration
from service.analysis.features import feature_columns, feature_list_problem
from service.analysis.predictor import ModelInfo
from service.errors import ModelBundleError
from service.model.numpy_network import NumpyNetwork
from service.model.scaler import MinMaxScaler

MODEL_FILE = "model.keras"
SCALER_FILE = "scaler.json"
CARD_FILE = "model_card.json"
CALIBRATION_FILE = "calibration.json"
PREDICT_BATCH_ROWS = 4096


@dataclass(frozen=True)
class ModelBundle:
    """A loaded bundle; satisfies service.analysis.predictor.UtilisationPredictor.

    `feature_names` are the network's inputs; `columns` where each sits in the service's rows.
    """

    info: ModelInfo
    feature_names: tuple[str, ...]
    columns: np.ndarray
    scaler: MinMaxScaler
    network: NumpyNetwork
    card: dict[str, Any]
    calibration: Calibration | None = None

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Utilisation estimates in [0, 1] for a batch of the service's feature rows.

        Rows go through the network `PREDICT_BATCH_ROWS` at a time (as Keras's `predict` does),
        so each layer's activations stay in the CPU cache however many links there are.
        """
        inputs = features[:, self.columns]
        starts = range(0, len(inputs), PREDICT_BATCH_ROWS) or range(1)
        batches = [inputs[start : start + PREDICT_BATCH_ROWS] for start in starts]
        predicted = [self.network.predict(self.scaler.transform(batch)) for batch in batches]
        estimates: np.ndarray = np.clip(np.concatenate(predicted), 0.0, 1.0)
        return estimates


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_bundle(directory: Path, service_features: tuple[str, ...]) -> ModelBundle:
    """Load and verify a bundle for rows of `service_features`; ModelBundleError says exactly
    what is wrong."""
    try:
        card = json.loads((directory / CARD_FILE).read_text())
        scaler = MinMaxScaler.from_json(json.loads((directory / SCALER_FILE).read_text()))
        digest = file_sha256(directory / MODEL_FILE)
        network = NumpyNetwork.from_keras_file(directory / MODEL_FILE)
        calibration = _load_calibration(directory, card)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ModelBundleError(f"model bundle {directory}: {error}") from None
    _verify(directory, card, scaler, network, digest, service_features)
    info = ModelInfo(
        name=str(card["name"]),
        version=str(card["version"]),
        sha256=digest,
        created=str(card["created"]),
    )
    names = tuple(card["feature_names"])
    columns = np.array(feature_columns(names, service_features))
    return ModelBundle(info, names, columns, scaler, network, card, calibration)


def _load_calibration(directory: Path, card: dict[str, Any]) -> Calibration | None:
    """The card's calibration, its file's sha256 checked; None (logged) if the card has none."""
    entry = card.get("calibration")
    if entry is None:
        logging.getLogger("nettel.model").info(
            "model bundle %s has no calibration: congestion_probability, utilisation_low and "
            "utilisation_high are null",
            directory,
        )
        return None
    path = directory / CALIBRATION_FILE
    digest = file_sha256(path)
    if not isinstance(entry, dict) or entry.get("sha256") != digest:
        raise ValueError(f"{CALIBRATION_FILE} sha256 {digest[:12]}... differs from the card's")
    return Calibration.from_json(json.loads(path.read_text()))


def _verify(
    directory: Path,
    card: dict[str, Any],
    scaler: MinMaxScaler,
    network: NumpyNetwork,
    digest: str,
    service_features: tuple[str, ...],
) -> None:
    missing = {"name", "version", "created", "sha256", "feature_names"} - set(card)
    problem = None
    if missing:
        problem = f"model card lacks {sorted(missing)}"
    elif card["sha256"] != digest:
        problem = (
            f"{MODEL_FILE} sha256 {digest[:12]}... differs from the card's {card['sha256'][:12]}..."
        )
    elif listed := feature_list_problem(tuple(card["feature_names"]), service_features):
        problem = f"{listed}; retrain with this version"
    elif scaler.feature_names != tuple(card["feature_names"]) or network.input_width != len(
        card["feature_names"]
    ):
        problem = "scaler or network input width does not match the feature list"
    if problem:
        raise ModelBundleError(f"model bundle {directory}: {problem}")
