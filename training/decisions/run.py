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

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from service.analysis.predictor import UtilisationPredictor
from service.rucio.settings import DEFAULT_INTERVAL_SECONDS
from simulation.decision_world import DecisionScenario, DecisionWorld
from training.decisions.policies import POLICIES, Choice
from training.decisions.rucio_mirror import RUCIO_CACHE_SECONDS, RucioMirror
from training.decisions.served_view import PUBLISH_LAG_S, ServedView, ViewHistory
from training.decisions.throughput import latest_throughput

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


def rucio_mirror(scenario: DecisionScenario, interval_s: float | None = None) -> RucioMirror:
    """Rucio's view of the scenario's costs: sync and cache phases drawn from its choice seed."""
    rng = np.random.default_rng([scenario.choice_seed, 0x5C])
    interval = interval_s or DEFAULT_INTERVAL_SECONDS
    return RucioMirror(
        len(scenario.paths),
        interval,
        float(rng.uniform(0.0, interval)),
        float(rng.uniform(0.0, RUCIO_CACHE_SECONDS)),
    )


class ClosedLoop:
    """A scenario's ns-3 world and the view nettel serves of it, advanced minute by minute.

    Until the first request every policy's run is the same, so a caller may warm a loop up once
    and fork the process for each policy (`training.decisions.simulate`).
    """

    def __init__(
        self, scenario: DecisionScenario, predictor: UtilisationPredictor, first_minute: int
    ) -> None:
        self.scenario = scenario
        self.world = DecisionWorld(scenario)
        self.served = ServedView(scenario, predictor, first_minute)
        self.history = ViewHistory()
        self.minute = 0

    def warm_up(self) -> None:
        """Advance through the minutes before the first request."""
        while 60.0 * (self.minute + 1) + PUBLISH_LAG_S <= self.scenario.request_start_s:
            self.advance()

    def advance(self) -> None:
        """Run the current minute and publish its view (PUBLISH_LAG_S after its end), with the
        latest archived throughput results when the scenario runs tests."""
        self.world.run_until(60.0 * (self.minute + 1) + PUBLISH_LAG_S)
        delays = self.world.minute_delays(self.minute)
        view = self.served.publish(self.minute, delays)
        tests = self.scenario.throughput_tests
        if tests is not None:
            bps, start = latest_throughput(
                tests, self.world.throughput_bps(), len(self.scenario.paths), view.published_s
            )
            view = replace(view, throughput_bps=bps, throughput_start_s=start)
        self.history.views.append(view)
        self.minute += 1

    def throughput_results(self) -> list[list[float | None]]:
        """Every throughput test so far: [path, start s, result b/s (None: not ended)]."""
        tests = self.scenario.throughput_tests
        if tests is None:
            return []
        measured = self.world.throughput_bps()
        return [
            [int(path), round(float(start), 3), None if np.isnan(bps) else round(float(bps))]
            for path, start, bps in zip(tests.path, tests.start_s, measured, strict=True)
        ]

    def close(self) -> None:
        self.world.close()

    def __enter__(self) -> ClosedLoop:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def follow_policy(
    loop: ClosedLoop, policy: str, *, forced: tuple[int, int] | None = None
) -> list[Outcome]:
    """Run `loop` to its end with `policy` picking the sources; `forced` = (request, path)
    puts one request on a given path and stops once it has finished (an oracle probe)."""
    scenario, world, history = loop.scenario, loop.world, loop.history
    choose = POLICIES[policy]
    rng = np.random.default_rng([scenario.choice_seed, sum(map(ord, policy))])
    mirror = rucio_mirror(scenario)
    requests = scenario.requests
    chosen: list[tuple[int, Choice, int]] = []
    next_request = int(np.searchsorted(requests.arrival_s, 60.0 * loop.minute + PUBLISH_LAG_S))
    if next_request:
        raise ValueError("requests arrived during the warm-up: they would have no policy")
    while loop.minute < scenario.minutes:
        publish_s = 60.0 * (loop.minute + 1) + PUBLISH_LAG_S
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
        loop.advance()
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


def run_policy(
    scenario: DecisionScenario,
    policy: str,
    predictor: UtilisationPredictor,
    first_minute: int,
    *,
    forced: tuple[int, int] | None = None,
) -> list[Outcome]:
    """Every request's outcome when `policy` picks the sources (one whole run here)."""
    with ClosedLoop(scenario, predictor, first_minute) as loop:
        loop.warm_up()
        return follow_policy(loop, policy, forced=forced)


def _finished(world: DecisionWorld, chosen: list[tuple[int, Choice, int]], request: int) -> bool:
    return any(r == request and world.completion_s(t) is not None for r, _, t in chosen)


def oracle_sample(scenario: DecisionScenario) -> list[int]:
    """The requests whose oracle is re-simulated (seeded)."""
    n = len(scenario.requests)
    rng = np.random.default_rng([scenario.choice_seed, 0x0AC1E])
    return sorted(rng.choice(n, min(ORACLE_SAMPLE, n), replace=False).tolist()) if n else []


def oracle_duration(outcomes: list[Outcome], request: int) -> float | None:
    """The forced request's transfer time in an oracle probe's outcomes."""
    return next(o.duration_s for o in outcomes if o.request == request)
