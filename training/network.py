"""The utilisation network: netTel's fully connected ReLU stack, built and trained with Keras.

Input(n inputs) -> Dense(w1, relu) -> Dropout(d) -> Dense(w2, relu) -> Dropout(d) -> Dense(w3, relu)
-> Dense(1). An ensemble of such members is merged into one network of the same layer kinds
(`merge_members`), so serving still makes one call. Only layers `service.model.numpy_network`
can run (Dense with relu/linear/sigmoid, Dropout), so serving needs no TensorFlow. Keras is
imported on first use (`load_keras`), not with this module: importing the training code (as
collecting its tests does, in every test worker) costs no Keras start-up (~4 CPU-s).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.linalg import block_diag

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

DEFAULT_WIDTHS = (100, 50, 5)
DEFAULT_DROPOUT = 0.5
BATCH_SIZE = 512
OUTPUT_ACTIVATIONS = ("linear", "sigmoid")
OPTIMIZERS = ("rmsprop", "adam")
#: Training losses (Keras names). Both are minimised by the target's conditional mean, so the
#: estimate means the same; cross-entropy needs the sigmoid output.
LOSSES = ("mse", "binary_crossentropy")
MAX_ENSEMBLE = 16


def load_keras() -> ModuleType:
    """Keras, imported (with TensorFlow under it) the first time it is needed.

    TensorFlow's C++ logging is quieted, and its plain CPU kernels used: oneDNN's reordered
    arithmetic makes results depend on the machine (and its start-up notice bypasses the log
    level). Both settings must precede TensorFlow's import.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import keras

    return keras


def load_tensorflow() -> ModuleType:
    """TensorFlow, imported the first time it is needed, after `load_keras`'s settings."""
    load_keras()
    import tensorflow

    return tensorflow


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
    #: Members trained from different seeds and merged into one network (`merge_members`).
    ensemble: int = 1
    #: Squared error, or cross-entropy against the [0, 1] target: through a sigmoid the squared
    #: error's gradient vanishes on rows the network is confidently wrong about, the
    #: cross-entropy's (estimate - target) does not.
    loss: str = "mse"

    def __post_init__(self) -> None:
        if not self.widths or any(w < 1 for w in self.widths):
            raise ValueError(f"widths must be positive layer sizes, not {self.widths}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), not {self.dropout}")
        if self.output_activation not in OUTPUT_ACTIVATIONS:
            raise ValueError(f"output activation must be one of {OUTPUT_ACTIVATIONS}")
        if self.optimizer not in OPTIMIZERS or self.learning_rate <= 0:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS} with a positive learning rate")
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, not {self.loss!r}")
        if self.loss == "binary_crossentropy" and self.output_activation != "sigmoid":
            raise ValueError("the binary_crossentropy loss needs the sigmoid output")
        if not 1 <= self.ensemble <= MAX_ENSEMBLE:
            raise ValueError(f"ensemble must be 1 to {MAX_ENSEMBLE} members, not {self.ensemble}")


def build_network(n_features: int, config: NetworkConfig, seed: int) -> keras.Sequential:
    """A compiled Sequential network (`config.loss`), initialised deterministically from `seed`.

    Also turns on TensorFlow op determinism for the process, so training with the same seed
    gives the same weights.
    """
    keras = load_keras()
    keras.utils.set_random_seed(seed)
    load_tensorflow().config.experimental.enable_op_determinism()
    constraint = {"kernel_constraint": keras.constraints.NonNeg()} if config.monotone else {}
    layers: list[keras.layers.Layer] = [keras.Input((n_features,))]
    for depth, width in enumerate(config.widths):
        layers.append(keras.layers.Dense(width, activation="relu", **constraint))
        if depth < len(config.widths) - 1 and config.dropout > 0:
            layers.append(keras.layers.Dropout(config.dropout))
    layers.append(keras.layers.Dense(1, activation=config.output_activation, **constraint))
    model = keras.Sequential(layers)
    model.compile(optimizer=_optimizer(config), loss=config.loss)
    return model


def train_members(
    n_features: int,
    config: NetworkConfig,
    seed: int,
    fit: Callable[[keras.Sequential], list[float]],
) -> tuple[keras.Sequential, list[float]]:
    """Build and `fit` (which returns the epoch losses) each of the `config.ensemble` members,
    seeded `seed`, `seed` + 1, ... (one member is the plain network); the merged network and
    the members' mean training loss of each epoch."""
    members, losses = [], []
    for member in range(config.ensemble):
        model = build_network(n_features, config, seed + member)
        losses.append(fit(model))
        members.append(model)
    return merge_members(members), [float(loss) for loss in np.mean(losses, axis=0)]


def merge_members(members: list[keras.Sequential]) -> keras.Sequential:
    """One network whose output is the output activation of the members' mean pre-activation
    output (for sigmoid members: the mean of their logits).

    Members must share one architecture. The merged first layer stacks the members' units side
    by side, deeper layers are block-diagonal (member i's units see only member i's), and the
    output averages; Dropout, identity at inference, is left out. Exact: the merged network
    computes what averaging the members' pre-activation outputs computes.
    """
    if len(members) == 1:
        return members[0]
    keras = load_keras()
    stacks = [
        [layer for layer in m.layers if isinstance(layer, keras.layers.Dense)] for m in members
    ]
    shapes = {
        tuple(tuple(w.shape) for layer in stack for w in layer.get_weights()) for stack in stacks
    }
    if len(shapes) != 1:
        raise ValueError("ensemble members must share one architecture")
    first = stacks[0]
    n_features = int(first[0].get_weights()[0].shape[0])
    merged = keras.Sequential([keras.Input((n_features,))])
    for depth, layer in enumerate(first):
        kernels = [stack[depth].get_weights()[0] for stack in stacks]
        biases = [stack[depth].get_weights()[1] for stack in stacks]
        if depth == 0:
            kernel, bias = np.hstack(kernels), np.concatenate(biases)
        elif depth < len(first) - 1:
            kernel, bias = block_diag(*kernels), np.concatenate(biases)
        else:
            kernel = np.vstack(kernels) / len(members)
            bias = np.mean(biases, axis=0)
        dense = keras.layers.Dense(kernel.shape[1], activation=layer.get_config()["activation"])
        merged.add(dense)
        dense.set_weights([kernel.astype(np.float32), bias.astype(np.float32)])
    return merged


def _optimizer(config: NetworkConfig) -> keras.optimizers.Optimizer:
    keras = load_keras()
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
    keras = load_keras()
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
    keras = load_keras()
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
