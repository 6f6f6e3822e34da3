"""The slot for a utilisation predictor: a batch of feature rows in, a batch of utilisations out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from service.analysis.calibration import Calibration


@dataclass(frozen=True)
class ModelInfo:
    """Identity of a loaded model, as shown in /costmatrix and /metrics."""

    name: str
    version: str
    sha256: str
    created: str


class UtilisationPredictor(Protocol):
    """Anything that maps (links x FEATURE_NAMES) rows to utilisation ratios in [0, 1], reading
    its `feature_names` (its inputs, all among FEATURE_NAMES) out of them."""

    @property
    def info(self) -> ModelInfo: ...

    @property
    def feature_names(self) -> tuple[str, ...]: ...

    @property
    def calibration(self) -> Calibration | None:
        """Maps estimates to congestion probability and interval; None if the model has none."""
        ...

    def predict(self, features: np.ndarray) -> np.ndarray: ...
