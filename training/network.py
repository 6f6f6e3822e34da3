"""The utilisation network: netTel's fully connected ReLU stack, built and trained with Keras.

Input(n inputs) -> Dense(w1, relu) -> Dropout(d) -> Dense(w2, relu) -> Dropout(d) -> Dense(w3, relu)
-> Dense(1). Only layers `service.model.numpy_network` can run (Dense with relu/linear/sigmoid,
Dropout), so serving needs no TensorFlow. Importing this module imports Keras (training only).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# Quiet TensorFlow's C++ logging, and use its plain CPU kernels: oneDNN's reordered arithmetic
# makes results depend on the machine (and its start-up notice bypasses the log level).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

DEFAULT_WIDTHS = (100, 50, 5)
DEFAULT_DROPOUT = 0.5
BATCH_SIZE = 512
OUTPUT_ACTIVATIONS = ("linear", "sigmoid")
OPTIMIZERS = ("rmsprop", "adam")


@dataclass(frozen=True)
class NetworkConfig:
    """Architecture and optimiser; validated on construction.

    The sigmoid output is the default: it keeps estimates inside [0, 1] without the clipping
    that would tie every negative linear output at 0 (ties lower the ROC AUC).
    """

    widths: tuple[int, ...] = DEFAULT_WIDTHS
    dropout: float = DEFAULT_DROPOUT
    output_activation: str = "sigmoid"
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    #: Every Dense kernel kept non-negative while training, so the estimate never decreases as
    #: an input grows (a physics prior when every input reads "more = busier").
    monotone: bool = False

    def __post_init__(self) -> None:
        if not self.widths or any(w < 1 for w in self.widths):
            raise ValueError(f"widths must be positive layer sizes, not {self.widths}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), not {self.dropout}")
        if self.output_activation not in OUTPUT_ACTIVATIONS:
            raise ValueError(f"output activation must be one of {OUTPUT_ACTIVATIONS}")
        if self.optimizer not in OPTIMIZERS or self.learning_rate <= 0:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS} with a positive learning rate")


def build_network(n_features: int, config: NetworkConfig, seed: int) -> keras.Sequential:
    """A compiled (MSE) Sequential network, initialised deterministically from `seed`.

    Also turns on TensorFlow op determinism for the process, so training with the same seed
    gives the same weights.
    """
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    constraint = {"kernel_constraint": keras.constraints.NonNeg()} if config.monotone else {}
    layers: list[keras.layers.Layer] = [keras.Input((n_features,))]
    for depth, width in enumerate(config.widths):
        layers.append(keras.layers.Dense(width, activation="relu", **constraint))
        if depth < len(config.widths) - 1 and config.dropout > 0:
            layers.append(keras.layers.Dropout(config.dropout))
    layers.append(keras.layers.Dense(1, activation=config.output_activation, **constraint))
    model = keras.Sequential(layers)
    model.compile(optimizer=_optimizer(config), loss="mse")
    return model


def _optimizer(config: NetworkConfig) -> keras.optimizers.Optimizer:
    if config.optimizer == "adam":
        return keras.optimizers.Adam(config.learning_rate)
    return keras.optimizers.RMSprop(config.learning_rate)


def fit_network(
    model: keras.Sequential,
    features: np.ndarray,
    labels: np.ndarray,
    epochs: int,
    batch_size: int = BATCH_SIZE,
    verbose: int | str = "auto",
) -> list[float]:
    """Train on already scaled rows (shuffled every epoch); the training loss of each epoch."""
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, not {epochs}")
    history = model.fit(
        features,
        labels,
        batch_size=batch_size,
        epochs=epochs,
        shuffle=True,
        verbose=verbose,
        callbacks=[keras.callbacks.LearningRateScheduler(_cosine_decay(model, epochs))],
    )
    return [float(loss) for loss in history.history["loss"]]


def fit_network_batches(
    model: keras.Sequential,
    batches: tf.data.Dataset[Any],
    epochs: int,
    verbose: int | str = "auto",
) -> list[float]:
    """Train on a dataset of already scaled (features, labels) batches, read anew each epoch
    (streamed training: the rows need not fit in memory); the training loss of each epoch."""
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, not {epochs}")
    history = model.fit(
        batches,
        epochs=epochs,
        shuffle=False,  # the batches come shuffled
        verbose=verbose,
        callbacks=[keras.callbacks.LearningRateScheduler(_cosine_decay(model, epochs))],
    )
    return [float(loss) for loss in history.history["loss"]]


def _cosine_decay(model: keras.Sequential, epochs: int) -> Callable[[int, float], float]:
    """Learning rate of each epoch: the initial one decayed along a half cosine to 5 % of it.

    Late epochs then take small steps, so the result depends less on the last few batches.
    """
    initial = float(model.optimizer.learning_rate)

    def rate(epoch: int, _current: float) -> float:
        return initial * (0.05 + 0.95 * (1 + math.cos(math.pi * epoch / epochs)) / 2)

    return rate


def predict_network(model: keras.Sequential, features: np.ndarray) -> np.ndarray:
    """The network's raw output per scaled row (1-D), as Keras computes it."""
    outputs: np.ndarray = model.predict(features, batch_size=8192, verbose=0)
    return outputs[:, 0]
