"""What nettel serves for a decision scenario's candidate paths, minute by minute.

Each simulated minute's probe delays become the bus messages a perfSONAR toolkit publishes
(`simulation.bus_format`), go through the service's parser into a real `LinkState`, and the
service's own `MatrixCycle` recomputes the matrix (with the shipped bundle, and once more without
a model for the filter's floor), dated by the simulation's clock: the served cost is exactly
what `/costmatrix` would hold at that moment (the replay `served_calibration` checks).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from service.analysis.predictor import UtilisationPredictor
from service.matrix.cycle import MatrixCycle
from service.matrix.link_record import LinkRecord
from service.parse.perfsonar import parse_messages
from service.parse.records import MeasurementKind, ParsedMessage
from service.state.link_state import LinkState
from simulation.bus_format import build_delay_message, build_loss_message
from simulation.decision_world import DecisionScenario, scenario_hosts
from simulation.simulator_ns3 import minute_histograms

#: Seconds after a minute ends until its results are served (collector and cycle latency).
PUBLISH_LAG_S = 2.0
#: Seconds between recomputes the served cycle is told (the cycles here are driven by hand).
CYCLE_INTERVAL_S = 10.0


@dataclass(frozen=True)
class CandidateView:
    """The served values of the K candidates (arrays over candidates), as of `published_s`."""

    published_s: float
    cost: np.ndarray
    no_model_cost: np.ndarray
    utilisation: np.ndarray
    congestion_probability: np.ndarray
    loss: np.ndarray
    excess_delay_ms: np.ndarray
    min_delay_ms: np.ndarray
    #: With throughput tests: each path's latest archived result and its test's start (s).
    throughput_bps: np.ndarray | None = None
    throughput_start_s: np.ndarray | None = None

    def record(self) -> dict[str, list[float | None]]:
        """JSON-ready arrays (NaN as null; the throughput only where there are tests)."""
        names: tuple[str, ...] = (
            "cost",
            "no_model_cost",
            "utilisation",
            "congestion_probability",
            "loss",
            "excess_delay_ms",
            "min_delay_ms",
        )
        if self.throughput_bps is not None:
            names += ("throughput_bps", "throughput_start_s")
        return {name: _json_floats(getattr(self, name)) for name in names}


@dataclass
class ViewHistory:
    """Every view served so far, in publication order."""

    views: list[CandidateView] = field(default_factory=list)

    def at(self, seconds: float) -> CandidateView | None:
        """The view served at `seconds` (the newest published by then); None before the first."""
        for view in reversed(self.views):
            if view.published_s <= seconds:
                return view
        return None


class ServedView:
    """Feeds a scenario's minutes into a service state and reads the served candidates."""

    def __init__(
        self, scenario: DecisionScenario, predictor: UtilisationPredictor, first_minute: int
    ) -> None:
        self._scenario = scenario
        self._hosts = scenario_hosts(scenario)
        self._first_minute = first_minute
        self._now = 60.0 * first_minute
        self._state = LinkState()
        self._served = self._cycle(predictor)
        self._plain = self._cycle(None)
        self._source_index = {ip: i for i, ip in enumerate(self._hosts.host_ips[1:])}
        self._min_delay = np.full(len(scenario.paths), np.inf)

    def _cycle(self, predictor: UtilisationPredictor | None) -> MatrixCycle:
        return MatrixCycle(self._state, CYCLE_INTERVAL_S, predictor, clock=lambda: self._now)

    def publish(self, minute: int, delays_ms: np.ndarray) -> CandidateView:
        """Apply `minute`'s probe delays (paths x probes, ms, NaN lost) and recompute; the view
        served from `PUBLISH_LAG_S` after the minute's end."""
        published_s = 60.0 * (minute + 1) + PUBLISH_LAG_S
        self._now = 60.0 * self._first_minute + published_s
        self._state.apply_batch(self._messages(minute, delays_ms), self._now)
        served = self._by_path(self._served.recompute().links)
        plain = self._by_path(self._plain.recompute().links)
        mean = _field(served, lambda link: link["delay_ms"]["mean"])
        self._min_delay = np.fmin(self._min_delay, mean)
        return CandidateView(
            published_s=published_s,
            cost=_field(served, lambda link: link["cost"]),
            no_model_cost=_field(plain, lambda link: link["cost"]),
            utilisation=_field(served, lambda link: link["utilisation"]),
            congestion_probability=_field(served, lambda link: link["congestion_probability"]),
            loss=_field(served, lambda link: link["packet_loss"]),
            excess_delay_ms=mean - self._min_delay,
            min_delay_ms=np.where(np.isfinite(self._min_delay), self._min_delay, np.nan),
        )

    def _messages(self, minute: int, delays_ms: np.ndarray) -> list[ParsedMessage]:
        timestamp = (self._first_minute + minute) * 60
        frames: list[tuple[MeasurementKind, str]] = []
        for path, draw in enumerate(self._scenario.paths):
            delays = delays_ms[path : path + 1] + draw.clock_offset_ms
            histogram = minute_histograms(delays, draw.bucket_ms)[0]
            if histogram:
                _, body = build_delay_message(self._hosts, path, {timestamp: histogram})
                frames.append((MeasurementKind.DELAY, json.dumps(body)))
            loss = float(np.isnan(delays).mean())
            _, body = build_loss_message(self._hosts, path, {timestamp: loss})
            frames.append((MeasurementKind.LOSS, json.dumps(body)))
        parsed = parse_messages(frames)
        messages = [m for m in parsed if isinstance(m, ParsedMessage)]
        if len(messages) != len(parsed):
            raise ValueError(f"the service refused a simulated message: {parsed}")
        return messages

    def _by_path(self, links: Sequence[LinkRecord]) -> list[LinkRecord | None]:
        by_path: list[LinkRecord | None] = [None] * len(self._scenario.paths)
        for link in links:
            path = self._source_index.get(link["source"])
            if path is not None:
                by_path[path] = link
        return by_path


def _field(links: list[LinkRecord | None], read: Callable[[LinkRecord], Any]) -> np.ndarray:
    values = [None if link is None else read(link) for link in links]
    return np.array([np.nan if v is None else float(v) for v in values])


def _json_floats(values: np.ndarray) -> list[float | None]:
    return [None if not np.isfinite(v) else round(float(v), 6) for v in values]
