"""Rucio's view of the served cost in the decision benchmark: sync writes and the 300 s cache."""

from __future__ import annotations

import numpy as np

from service.rucio.distances import PenaltyPolicy, penalty
from training.decisions.rucio_mirror import BASELINE, RucioMirror
from training.decisions.served_view import CandidateView, ViewHistory


def view(published_s: float, costs: list[float]) -> CandidateView:
    cost = np.array(costs)
    nan = np.full(len(costs), np.nan)
    return CandidateView(published_s, cost, cost, nan, nan, nan, nan, nan)


def test_the_cache_and_the_sync_before_it_decide_what_a_request_sees() -> None:
    mirror = RucioMirror(2, interval_s=60.0, sync_phase_s=10.0, cache_phase_s=100.0)
    assert mirror.cache_refreshed_at(399.0) == 100.0
    assert mirror.cache_refreshed_at(400.0) == 400.0
    # the cache refreshed at 400 s holds what the sync of 370 s wrote
    assert mirror.synced_at(450.0) == 370.0


def test_distances_follow_the_cost_only_after_a_sync_and_a_cache_refresh() -> None:
    policy = PenaltyPolicy()
    mirror = RucioMirror(2, 60.0, 10.0, 100.0, policy)
    history = ViewHistory([view(62.0, [0.0, 0.0]), view(302.0, [1.0, 0.0])])
    # at 350 s Rucio still ranks by the cache of 100 s (the sync of 70 s: both calm)
    assert mirror.distances_at(350.0, history).tolist() == [BASELINE, BASELINE]
    # the cache of 400 s holds the sync of 370 s, which read the view of 302 s
    congested = BASELINE + penalty(1.0, policy)
    assert mirror.distances_at(450.0, history).tolist() == [congested, BASELINE]
