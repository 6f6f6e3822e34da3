"""The decision benchmark's policies: what each reads, and random tie-breaking."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from training.decisions.policies import POLICIES, lowest
from training.decisions.rucio_mirror import RucioMirror
from training.decisions.served_view import CandidateView, ViewHistory


def test_lowest_ranks_missing_scores_last_and_breaks_ties_at_random() -> None:
    rng = np.random.default_rng(0)
    picks = {lowest(np.array([0.2, 0.2, np.nan, 0.5]), rng) for _ in range(50)}
    assert picks == {0, 1}
    assert lowest(np.array([np.nan, 0.9]), rng) == 1


def test_each_policy_reads_its_own_score_of_the_view_served_at_the_request() -> None:
    nan = np.full(3, np.nan)
    early = CandidateView(
        62.0,
        cost=np.array([0.9, 0.1, 0.5]),
        no_model_cost=np.array([0.0, 0.5, 0.4]),
        utilisation=np.array([0.3, 0.6, 0.1]),
        congestion_probability=nan,
        loss=nan,
        excess_delay_ms=nan,
        min_delay_ms=np.array([30.0, 20.0, 10.0]),
    )
    late = replace(early, published_s=122.0, cost=np.array([0.1, 0.9, 0.9]))
    history = ViewHistory([early, late])
    mirror = RucioMirror(3, 60.0, 0.0, 0.0)
    rng = np.random.default_rng(1)

    def pick(policy: str, t: float = 100.0) -> int:
        return POLICIES[policy](t, history, mirror, rng).path

    assert pick("served") == 1
    assert pick("served", 130.0) == 0  # the newer view, once published
    assert pick("no_model") == 0
    assert pick("utilisation") == 2
    assert pick("static") == 2
