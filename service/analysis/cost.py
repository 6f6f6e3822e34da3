"""Link cost in [0, 1]: 0 for an idle healthy link, 1 for an unusable one.

    cost = max(1 - (1 - U)(1 - L)(1 - D),  floor)

with U = clip(utilisation, 0, 1)^4 (0 when no estimate), L = 1 - exp(-loss / 0.01) and
D = 1 - exp(-max(0, delay - all-time minimum delay) / 20 ms). The floor is the model's calibrated
congestion probability (P(utilisation > 70 %)) when the link has one; without a model (or a
calibration) it is the empirical filter's: 0.5 when the filter says congested, else 0.

With 600 probes a minute one lost probe (0.17 %) already passes the filter's 1e-4 loss
threshold, so its floor of 0.5 marked calm links congested; the calibrated probability weighs the
same evidence (the filter's verdict is one of the network's inputs) against everything else the
network sees. Each term is non-decreasing in its input, the probability in the utilisation
estimate, and the filter's floor only switches on as loss and delay grow, so the cost is
monotone non-decreasing in utilisation, loss and delay above the link's minimum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

LOSS_SCALE = 0.01
EXCESS_DELAY_SCALE_MS = 20.0
UTILISATION_EXPONENT = 4
CONGESTED_FLOOR = 0.5


def compute_cost(
    utilisation: np.ndarray,
    loss: np.ndarray,
    excess_delay_ms: np.ndarray,
    congested: np.ndarray,
    congestion_probability: np.ndarray | None = None,
) -> np.ndarray:
    """Vectorised cost of every link (NaN inputs count as 0: no evidence of trouble; a NaN
    probability means no model for that link, so the filter's floor applies).

    >>> compute_cost(np.array([np.nan, 1.0]), np.array([0.0, 0.0]), np.array([0.0, 0.0]),
    ...              np.array([False, False])).tolist()
    [0.0, 1.0]
    >>> compute_cost(np.array([0.1, 0.1]), np.array([0.0, 0.0]), np.array([0.0, 0.0]),
    ...              np.array([True, True]), np.array([0.02, np.nan])).tolist()
    [0.02, 0.5]
    """
    u = np.clip(np.nan_to_num(utilisation), 0.0, 1.0) ** UTILISATION_EXPONENT
    loss_term = 1.0 - np.exp(-np.clip(np.nan_to_num(loss), 0.0, None) / LOSS_SCALE)
    excess = np.clip(np.nan_to_num(excess_delay_ms), 0.0, None)
    delay_term = 1.0 - np.exp(-excess / EXCESS_DELAY_SCALE_MS)
    combined = 1.0 - (1.0 - u) * (1.0 - loss_term) * (1.0 - delay_term)
    floor = np.where(congested, CONGESTED_FLOOR, 0.0)
    if congestion_probability is not None:
        floor = np.where(np.isnan(congestion_probability), floor, congestion_probability)
    cost: np.ndarray = np.clip(np.maximum(combined, floor), 0.0, 1.0)
    return cost


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
