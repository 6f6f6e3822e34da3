"""How each policy picks a source among the candidates: pure functions of what it can see.

Every policy reads the cost matrix as served at the moment of the request (`ViewHistory.at`),
or as a scheduler sees it later (`stale_at`, through Rucio's mirror), and picks the candidate
with the lowest score; ties are broken at random (seeded), as Rucio's ranking leaves them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from training.decisions.rucio_mirror import RucioMirror
from training.decisions.served_view import CandidateView, ViewHistory
from training.decisions.throughput import FITTED_THROUGHPUT_SHAPE, served_tput_score


@dataclass(frozen=True)
class Choice:
    """What a policy picked, and from which view."""

    path: int
    view: CandidateView | None


#: (request arrival s, history, Rucio mirror, rng) -> choice
Policy = Callable[[float, ViewHistory, RucioMirror, np.random.Generator], Choice]


def lowest(scores: np.ndarray, rng: np.random.Generator) -> int:
    """Index of the lowest score (NaN: no data, ranked last), ties broken at random.

    >>> lowest(np.array([0.3, 0.1, np.nan]), np.random.default_rng(0))
    1
    """
    ranked = np.where(np.isnan(scores), np.inf, scores)
    best = np.flatnonzero(ranked == ranked.min())
    return int(rng.choice(best))


def _by_at(score: Callable[[CandidateView, float], np.ndarray]) -> Policy:
    """The policy ranking by `score(view served at t, t)`."""

    def choose(
        t: float, history: ViewHistory, mirror: RucioMirror, rng: np.random.Generator
    ) -> Choice:
        view = history.at(t)
        k = len(history.views[0].cost)
        if view is None:
            return Choice(int(rng.integers(k)), None)
        return Choice(lowest(score(view, t), rng), view)

    return choose


def _by(score: Callable[[CandidateView], np.ndarray]) -> Policy:
    return _by_at(lambda view, _: score(view))


def latest_throughput_of(view: CandidateView, t: float) -> tuple[np.ndarray, np.ndarray]:
    """The view's latest throughput per path and its age at `t` (NaN: no result)."""
    if view.throughput_bps is None or view.throughput_start_s is None:
        raise ValueError("a throughput policy needs a scenario with --throughput-tests")
    return view.throughput_bps, t - view.throughput_start_s


def throughput_only(view: CandidateView, t: float) -> np.ndarray:
    """`tput_only`: the highest latest throughput first, whatever its age (none: last)."""
    return -latest_throughput_of(view, t)[0]


def served_with_throughput(view: CandidateView, t: float) -> np.ndarray:
    """`served_tput`: the served cost's hazard and the aged throughput term, with the shape
    and weights the rule chose on the training runs (docs/decisions.md section 7)."""
    bps, age_s = latest_throughput_of(view, t)
    return served_tput_score(FITTED_THROUGHPUT_SHAPE, view.cost, bps, age_s)


def _random(
    t: float, history: ViewHistory, mirror: RucioMirror, rng: np.random.Generator
) -> Choice:
    return Choice(int(rng.integers(len(history.views[0].cost))), history.at(t))


def _stale_served(
    t: float, history: ViewHistory, mirror: RucioMirror, rng: np.random.Generator
) -> Choice:
    view = history.at(mirror.synced_at(t))
    if view is None:
        return _random(t, history, mirror, rng)
    return Choice(lowest(view.cost, rng), history.at(t))


def _through_rucio(
    t: float, history: ViewHistory, mirror: RucioMirror, rng: np.random.Generator
) -> Choice:
    return Choice(lowest(mirror.distances_at(t, history).astype(float), rng), history.at(t))


def hand_set_cost(view: CandidateView) -> np.ndarray:
    """The cost nettel served before it was fitted to transfer outcomes (docs/decisions.md):
    max(1 - (1 - U^4)(1 - L)(1 - D), P) with L = 1 - exp(-loss / 0.01) and
    D = 1 - exp(-delay above the minimum / 20 ms); kept to compare the fitted cost against.

    >>> nan = np.array([np.nan])
    >>> view = CandidateView(0.0, nan, nan, np.array([0.5]), np.array([0.02]), np.array([0.01]),
    ...                      np.array([20.0]), nan)
    >>> round(float(hand_set_cost(view)[0]), 6)  # 1 - 0.9375 exp(-2)
    0.873123
    """
    u = np.clip(np.nan_to_num(view.utilisation), 0.0, 1.0) ** 4
    loss = np.clip(np.nan_to_num(view.loss), 0.0, None) / 0.01
    excess = np.clip(np.nan_to_num(view.excess_delay_ms), 0.0, None) / 20.0
    combined = 1.0 - (1.0 - u) * np.exp(-loss - excess)
    cost: np.ndarray = np.maximum(combined, np.nan_to_num(view.congestion_probability))
    return cost


POLICIES: dict[str, Policy] = {
    "random": _random,
    "static": _by(lambda view: view.min_delay_ms),
    "no_model": _by(lambda view: view.no_model_cost),
    "served": _by(lambda view: view.cost),
    "utilisation": _by(lambda view: np.nan_to_num(view.utilisation)),
    "served_stale": _stale_served,
    "rucio": _through_rucio,
    "hand_set": _by(hand_set_cost),
    "tput_only": _by_at(throughput_only),
    "served_tput": _by_at(served_with_throughput),
}
#: Policies that read throughput test results (they need --throughput-tests).
THROUGHPUT_POLICIES = ("tput_only", "served_tput")
#: What each policy means, for reports.
DESCRIPTIONS = {
    "random": "random candidate",
    "static": "static: lowest all-time minimum delay (a static distance table)",
    "no_model": "no model: cost with the filter's floor",
    "served": "nettel's served cost, fresh",
    "utilisation": "the utilisation estimate alone",
    "served_stale": "served cost as late as Rucio sees it (sync interval + 300 s cache)",
    "rucio": "through Rucio: rucio-sync's distances (defaults), ordered as the conveyor does",
    "hand_set": "the hand-set cost served before the fit (utilisation^4, 0.01, 20 ms)",
    "tput_only": "the latest perfSONAR throughput result alone, whatever its age",
    "served_tput": "served cost and the latest throughput, aged (the rule's fitted shape)",
    "oracle": "oracle: the fastest candidate in hindsight (re-simulated; sampled requests)",
}
