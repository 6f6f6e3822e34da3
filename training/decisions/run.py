"""A policy's run through a decision scenario: ns-3 stepped minute by minute, closed loop.

At every minute's publication the served view is recomputed from the probes; each request that
arrives before the next publication is given to the policy, which picks a candidate, and the
transfer starts at its arrival as a TCP flow on that path. The policy's choices load the paths,
so what it sees next depends on what it chose (herding shows). Every policy runs on the same
seeded scenario (cross traffic, probes, requests) in a simulation of its own. The oracle of a
request re-runs the served-cost policy with that one request forced onto each candidate in turn
and keeps the fastest (`oracle_times`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from service.analysis.predictor import UtilisationPredictor
from service.rucio.settings import RucioSyncSettings
from simulation.decision_world import DecisionScenario, DecisionWorld
from training.decisions.policies import POLICIES, Choice
from training.decisions.rucio_mirror import RUCIO_CACHE_SECONDS, RucioMirror
from training.decisions.served_view import ServedView, ViewHistory

#: Requests per scenario whose oracle is found by re-simulation.
ORACLE_SAMPLE = 2
#: The policy the oracle's re-simulations follow for every other request.
ORACLE_BASE_POLICY = "served"


@dataclass(frozen=True)
class Outcome:
    """One request's transfer under one policy."""

    request: int
    arrival_s: float
    size_bytes: float
    path: int
    completion_s: float | None  # None: not finished by the scenario's end (censored)
    view: dict[str, Any] | None

    @property
    def duration_s(self) -> float | None:
        return None if self.completion_s is None else self.completion_s - self.arrival_s


def sync_interval_default() -> float:
    """rucio-sync's default interval (seconds)."""
    return float(RucioSyncSettings.model_fields["interval"].default)


def rucio_mirror(scenario: DecisionScenario, interval_s: float | None = None) -> RucioMirror:
    """Rucio's view of the scenario's costs: sync and cache phases drawn from its choice seed."""
    rng = np.random.default_rng([scenario.choice_seed, 0x5C])
    interval = interval_s or sync_interval_default()
    return RucioMirror(
        len(scenario.paths),
        interval,
        float(rng.uniform(0.0, interval)),
        float(rng.uniform(0.0, RUCIO_CACHE_SECONDS)),
    )


def run_policy(
    scenario: DecisionScenario,
    policy: str,
    predictor: UtilisationPredictor,
    first_minute: int,
    *,
    forced: tuple[int, int] | None = None,
) -> list[Outcome]:
    """Every request's outcome when `policy` picks the sources; `forced` = (request, path)
    puts one request on a given path and stops once it has finished (an oracle probe)."""
    choose = POLICIES[policy]
    rng = np.random.default_rng([scenario.choice_seed, sum(map(ord, policy))])
    served = ServedView(scenario, predictor, first_minute)
    history = ViewHistory()
    mirror = rucio_mirror(scenario)
    requests = scenario.requests
    chosen: list[tuple[int, Choice, int]] = []
    next_request = 0
    with DecisionWorld(scenario) as world:
        for minute in range(scenario.minutes):
            publish_s = 60.0 * (minute + 1)
            while next_request < len(requests) and requests.arrival_s[next_request] < publish_s:
                arrival = float(requests.arrival_s[next_request])
                if forced is not None and forced[0] == next_request:
                    choice = Choice(forced[1], history.at(arrival))
                else:
                    choice = choose(arrival, history, mirror, rng)
                size = float(requests.bytes[next_request])
                transfer = world.start_transfer(choice.path, arrival, size)
                chosen.append((next_request, choice, transfer))
                next_request += 1
            world.run_until(publish_s + 2.0)
            history.views.append(served.publish(minute, world.minute_delays(minute)))
            if forced is not None and _finished(world, chosen, forced[0]):
                break
        return [
            Outcome(
                request=r,
                arrival_s=float(requests.arrival_s[r]),
                size_bytes=float(requests.bytes[r]),
                path=choice.path,
                completion_s=world.completion_s(transfer),
                view=None if choice.view is None else choice.view.record(),
            )
            for r, choice, transfer in chosen
        ]


def _finished(world: DecisionWorld, chosen: list[tuple[int, Choice, int]], request: int) -> bool:
    return any(r == request and world.completion_s(t) is not None for r, _, t in chosen)


def oracle_sample(scenario: DecisionScenario) -> list[int]:
    """The requests whose oracle is re-simulated (seeded)."""
    n = len(scenario.requests)
    rng = np.random.default_rng([scenario.choice_seed, 0x0AC1E])
    return sorted(rng.choice(n, min(ORACLE_SAMPLE, n), replace=False).tolist()) if n else []


def oracle_probe(
    scenario: DecisionScenario,
    request: int,
    path: int,
    predictor: UtilisationPredictor,
    first_minute: int,
) -> float | None:
    """Request `request`'s transfer time when put on `path` (the rest as the base policy)."""
    outcomes = run_policy(
        scenario, ORACLE_BASE_POLICY, predictor, first_minute, forced=(request, path)
    )
    return next(o.duration_s for o in outcomes if o.request == request)
