"""The served utilisation model: loaded from a bundle, swapped atomically on reload, timed."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from service.analysis.calibration import Calibration
from service.analysis.features import FEATURE_NAMES
from service.analysis.predictor import ModelInfo
from service.model.bundle import ModelBundle, load_bundle

InferenceObserver = Callable[[float, int], None]


@dataclass(frozen=True)
class _TimedModel:
    """Delegates to a bundle and reports (seconds, rows) of every batched call."""

    bundle: ModelBundle
    observers: list[InferenceObserver] = field(default_factory=list)

    @property
    def info(self) -> ModelInfo:
        return self.bundle.info

    @property
    def feature_names(self) -> tuple[str, ...]:
        return self.bundle.feature_names

    @property
    def calibration(self) -> Calibration | None:
        return self.bundle.calibration

    def predict(self, features: np.ndarray) -> np.ndarray:
        started = time.perf_counter()
        result = self.bundle.predict(features)
        for observe in self.observers:
            observe(time.perf_counter() - started, len(features))
        return result


class ModelSlot:
    """Holds the current model; `reload` keeps the old one when the new bundle is refused."""

    def __init__(self, path: Path, log: logging.Logger | None = None) -> None:
        self.path = path
        self.inference_observers: list[InferenceObserver] = []
        self._log = log or logging.getLogger("nettel.model")
        self._lock = threading.Lock()
        self._current = self._load()

    @property
    def current(self) -> _TimedModel:
        return self._current

    def reload(self) -> ModelInfo:
        """Load the bundle again from `path` (raises ModelBundleError and keeps the old model)."""
        with self._lock:
            candidate = self._load()
            self._current = candidate
        self._log.info(
            "model loaded",
            extra={"version": candidate.info.version, "sha256": candidate.info.sha256},
        )
        return candidate.info

    def _load(self) -> _TimedModel:
        return _TimedModel(load_bundle(self.path, FEATURE_NAMES), self.inference_observers)
