"""Runs a saved Keras `.keras` ReLU network with numpy alone, so serving needs no TensorFlow.

Only the architecture nettel trains is accepted: a Sequential of InputLayer, Dense (relu, linear
or sigmoid activation) and Dropout (identity at inference). The archive's JSON config is read as
data and the weights from its HDF5 file (h5py, imported when a network is read); no code from
the file is ever executed.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import h5py

ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0.0),
    "linear": lambda x: x,
    "sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)),  # = 1/(1+e^-x), without overflow
}


@dataclass(frozen=True)
class DenseLayer:
    kernel: np.ndarray
    bias: np.ndarray
    activation: str


@dataclass(frozen=True)
class NumpyNetwork:
    """A stack of dense layers evaluated in float32, like Keras on the CPU."""

    layers: tuple[DenseLayer, ...]

    @property
    def input_width(self) -> int:
        return len(self.layers[0].kernel)

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """Network output for each row (1-D when the last layer has one unit)."""
        x = rows.astype(np.float32)
        for layer in self.layers:
            x = ACTIVATIONS[layer.activation](x @ layer.kernel + layer.bias)
        return x[:, 0] if x.shape[1] == 1 else x

    @classmethod
    def from_keras_file(cls, path: Path) -> NumpyNetwork:
        try:
            with zipfile.ZipFile(path) as archive:
                config = json.loads(archive.read("config.json"))
                weights = archive.read("model.weights.h5")
        except (OSError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as error:
            raise ValueError(f"{path} is not a readable .keras archive: {error}") from None
        specs = _dense_specs(config)
        import h5py  # only when a bundle is read: importing serving code does not load it

        with h5py.File(io.BytesIO(weights), "r") as store:
            return cls(tuple(_load_dense(store, name, act) for name, act in specs))


def _dense_specs(config: dict[str, Any]) -> list[tuple[str, str]]:
    """(weights path, activation) of each Dense layer, checking the architecture is supported."""
    if config.get("class_name") != "Sequential":
        raise ValueError("only Sequential models are supported")
    specs: list[tuple[str, str]] = []
    for layer in config["config"]["layers"]:
        kind = layer.get("class_name")
        if kind == "Dense":
            activation = layer["config"].get("activation", "linear")
            if activation not in ACTIVATIONS or not layer["config"].get("use_bias", True):
                raise ValueError(f"unsupported Dense layer: activation {activation!r}")
            specs.append((f"layers/dense{'_' + str(len(specs)) if specs else ''}", activation))
        elif kind not in ("InputLayer", "Dropout"):
            raise ValueError(f"unsupported layer type {kind!r}")
    if not specs:
        raise ValueError("the model has no Dense layer")
    return specs


def _load_dense(store: h5py.File, name: str, activation: str) -> DenseLayer:
    try:
        kernel = np.asarray(store[f"{name}/vars/0"], dtype=np.float32)
        bias = np.asarray(store[f"{name}/vars/1"], dtype=np.float32)
    except KeyError:
        raise ValueError(f"weights for {name} are missing") from None
    if kernel.ndim != 2 or bias.shape != (kernel.shape[1],):
        raise ValueError(f"weights for {name} have inconsistent shapes")
    return DenseLayer(kernel, bias, activation)
