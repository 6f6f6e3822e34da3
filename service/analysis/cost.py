"""Link cost in [0, 1]: 0 for an idle healthy link, 1 for an unusable one.

    cost = max(1 - (1 - U)(1 - L)(1 - D),  0.5 if congested else 0)

with U = clip(utilisation, 0, 1)^4 (0 when no estimate), L = 1 - exp(-loss / 0.01) and
D = 1 - exp(-max(0, delay - all-time minimum delay) / 20 ms). Each term is non-decreasing in its
input and the congestion floor only switches on as loss and delay grow, so the cost is monotone
non-decreasing in utilisation, loss and delay above the link's minimum.
"""

from __future__ import annotations

import numpy as np

LOSS_SCALE = 0.01
EXCESS_DELAY_SCALE_MS = 20.0
UTILISATION_EXPONENT = 4
CONGESTED_FLOOR = 0.5


def compute_cost(
    utilisation: np.ndarray, loss: np.ndarray, excess_delay_ms: np.ndarray, congested: np.ndarray
) -> np.ndarray:
    """Vectorised cost of every link (NaN inputs count as 0: no evidence of trouble).

    >>> compute_cost(np.array([np.nan, 1.0]), np.array([0.0, 0.0]), np.array([0.0, 0.0]),
    ...              np.array([False, False])).tolist()
    [0.0, 1.0]
    """
    u = np.clip(np.nan_to_num(utilisation), 0.0, 1.0) ** UTILISATION_EXPONENT
    loss_term = 1.0 - np.exp(-np.clip(np.nan_to_num(loss), 0.0, None) / LOSS_SCALE)
    excess = np.clip(np.nan_to_num(excess_delay_ms), 0.0, None)
    delay_term = 1.0 - np.exp(-excess / EXCESS_DELAY_SCALE_MS)
    combined = 1.0 - (1.0 - u) * (1.0 - loss_term) * (1.0 - delay_term)
    cost: np.ndarray = np.clip(
        np.maximum(combined, np.where(congested, CONGESTED_FLOOR, 0.0)), 0.0, 1.0
    )
    return cost
