"""Link cost in [0, 1]: the share of a file transfer's time the path is predicted to cost.

    cost = max(1 - exp(-h), floor)
    h = 0.5653 U^4 + 0.05385 (loss / 0.01) + 0.2368 log(1 + base delay / 10 ms)

with U = clip(utilisation, 0, 1) (0 when no estimate), loss the newest minute's loss ratio and
base delay the link's all-time minimum delay (negative, from clock offsets: 0). A transfer on a
path of cost c is predicted to take 1 / (1 - c) times as long as on an idle, lossless path with no
delay. The shape and weights were fitted to the transfer times of real TCP transfers in the
decision benchmark's training scenarios by the rule of docs/decisions.md (section 4): of 72
candidate shapes (powers of U, linear or log loss, delay above the minimum and base delay, the
calibrated congestion probability), the one with the lowest leave-one-scenario-out error; the
delay above the minimum and the congestion probability got weight 0 there (they are still
served). Without a model (or a calibration) the floor is the empirical filter's: 0.5 when it says
congested, else 0; with one, there is no floor.

Each term is non-decreasing in its input, and the filter's floor only switches on as loss and
delay grow, so the cost is monotone non-decreasing in utilisation, loss, delay above the minimum
and base delay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

CONGESTED_FLOOR = 0.5


Form = Literal["linear", "log"]


@dataclass(frozen=True)
class CostShape:
    """h = w_u U^power + w_l f_l(loss) + w_d f_d(excess delay) + w_p P + w_b f_b(base delay);
    "linear": loss / 0.01, excess / 20 ms, base / 50 ms; "log": log(1 + loss / 0.001),
    log(1 + excess / 5 ms), log(1 + base / 10 ms); base "none": no base-delay term."""

    utilisation_power: int
    loss_form: Form
    delay_form: Form
    base_delay_form: Form | Literal["none"]
    utilisation_weight: float
    loss_weight: float
    delay_weight: float
    probability_weight: float
    base_delay_weight: float


def hazard_terms(
    shape: CostShape,
    utilisation: np.ndarray,
    loss: np.ndarray,
    excess_delay_ms: np.ndarray,
    probability: np.ndarray,
    base_delay_ms: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The five transformed inputs, unweighted (NaN counts as 0: no evidence of trouble)."""
    u = np.clip(np.nan_to_num(utilisation), 0.0, 1.0) ** shape.utilisation_power
    lost = np.clip(np.nan_to_num(loss), 0.0, 1.0)
    excess = np.clip(np.nan_to_num(excess_delay_ms), 0.0, None)
    base = np.clip(np.nan_to_num(base_delay_ms), 0.0, None)
    loss_term = lost / 0.01 if shape.loss_form == "linear" else np.log1p(lost / 0.001)
    delay_term = excess / 20.0 if shape.delay_form == "linear" else np.log1p(excess / 5.0)
    if shape.base_delay_form == "none":
        base_term = np.zeros_like(base)
    else:
        base_term = base / 50.0 if shape.base_delay_form == "linear" else np.log1p(base / 10.0)
    p = np.clip(np.nan_to_num(probability), 0.0, 1.0)
    return u, loss_term, delay_term, p, base_term


#: The shipped shape: chosen and fitted by docs/decisions.md's rule on the training scenarios.
SHIPPED_SHAPE = CostShape(
    utilisation_power=4,
    loss_form="linear",
    delay_form="linear",
    base_delay_form="log",
    utilisation_weight=0.5653,
    loss_weight=0.05385,
    delay_weight=0.0,
    probability_weight=0.0,
    base_delay_weight=0.2368,
)


def compute_cost(
    utilisation: np.ndarray,
    loss: np.ndarray,
    excess_delay_ms: np.ndarray,
    base_delay_ms: np.ndarray,
    congested: np.ndarray,
    congestion_probability: np.ndarray | None = None,
    shape: CostShape = SHIPPED_SHAPE,
) -> np.ndarray:
    """Vectorised cost of every link (NaN inputs count as 0: no evidence of trouble; a NaN
    probability means no model for that link, so the filter's floor applies).

    >>> zero = np.zeros(2)
    >>> compute_cost(np.array([np.nan, 1.0]), zero, zero, zero, np.array([False, False])).round(4)
    array([0.    , 0.4318])
    >>> compute_cost(zero, zero, zero, zero, np.array([True, True]), np.array([0.9, np.nan]))
    array([0. , 0.5])
    """
    probability = (
        np.full(len(utilisation), np.nan) if congestion_probability is None
        else congestion_probability
    )  # fmt: skip
    terms = hazard_terms(shape, utilisation, loss, excess_delay_ms, probability, base_delay_ms)
    weights = (
        shape.utilisation_weight,
        shape.loss_weight,
        shape.delay_weight,
        shape.probability_weight,
        shape.base_delay_weight,
    )
    hazard = sum(w * term for w, term in zip(weights, terms, strict=True))
    floor = np.where(np.asarray(congested) & np.isnan(probability), CONGESTED_FLOOR, 0.0)
    cost: np.ndarray = np.clip(np.maximum(1.0 - np.exp(-hazard), floor), 0.0, 1.0)
    return cost
