"""Model bundles: `model.keras` + `scaler.json` + `model_card.json` in one directory.

Loading needs numpy and h5py only (see models.numpy_network); the card's sha256 must match the
`.keras` file and its feature list must equal the service's, or the bundle is refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.numpy_network import NumpyNetwork
from models.scaler import MinMaxScaler
from service.analysis.predictor import ModelInfo
from service.errors import ModelBundleError

MODEL_FILE = "model.keras"
SCALER_FILE = "scaler.json"
CARD_FILE = "model_card.json"
DEFAULT_BUNDLE = Path(__file__).resolve().parent / "bundle"


@dataclass(frozen=True)
class ModelBundle:
    """A loaded bundle; satisfies service.analysis.predictor.UtilisationPredictor."""

    info: ModelInfo
    feature_names: tuple[str, ...]
    scaler: MinMaxScaler
    network: NumpyNetwork
    card: dict[str, Any]

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Utilisation estimates in [0, 1] for a batch of raw feature rows."""
        return np.clip(self.network.predict(self.scaler.transform(features)), 0.0, 1.0)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_bundle(directory: Path, expected_features: tuple[str, ...]) -> ModelBundle:
    """Load and verify a bundle; ModelBundleError says exactly what is wrong."""
    try:
        card = json.loads((directory / CARD_FILE).read_text())
        scaler = MinMaxScaler.from_json(json.loads((directory / SCALER_FILE).read_text()))
        digest = file_sha256(directory / MODEL_FILE)
        network = NumpyNetwork.from_keras_file(directory / MODEL_FILE)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ModelBundleError(f"model bundle {directory}: {error}") from None
    _verify(directory, card, scaler, network, digest, expected_features)
    info = ModelInfo(
        name=str(card["name"]), version=str(card["version"]),
        sha256=digest, created=str(card["created"]),
    )
    return ModelBundle(info, tuple(card["feature_names"]), scaler, network, card)


def _verify(
    directory: Path, card: dict[str, Any], scaler: MinMaxScaler, network: NumpyNetwork,
    digest: str, expected_features: tuple[str, ...],
) -> None:
    missing = {"name", "version", "created", "sha256", "feature_names"} - set(card)
    problem = None
    if missing:
        problem = f"model card lacks {sorted(missing)}"
    elif card["sha256"] != digest:
        problem = f"{MODEL_FILE} sha256 {digest[:12]}... differs from the card's {card['sha256'][:12]}..."
    elif tuple(card["feature_names"]) != expected_features:
        problem = _feature_mismatch(tuple(card["feature_names"]), expected_features)
    elif scaler.feature_names != expected_features or network.input_width != len(expected_features):
        problem = "scaler or network input width does not match the feature list"
    if problem:
        raise ModelBundleError(f"model bundle {directory}: {problem}")


def _feature_mismatch(bundle: tuple[str, ...], service: tuple[str, ...]) -> str:
    only_bundle = [name for name in bundle if name not in service]
    only_service = [name for name in service if name not in bundle]
    detail = f"only in bundle {only_bundle[:5]}, only in service {only_service[:5]}"
    if not only_bundle and not only_service:
        detail = "same names in a different order"
    return f"feature list differs from the service's ({detail}); retrain with this nettel version"
