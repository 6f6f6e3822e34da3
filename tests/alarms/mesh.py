"""A small full mesh fed minute by minute through `LinkState.apply_batch`, with values set per
link, and an engine judging it the way the matrix cycle calls it (each minute once settled)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from service.alarms.book import AlarmBook
from service.alarms.engine import AlarmEngine, AlarmRules
from service.alarms.records import AlarmEvent
from service.parse.histogram import HistogramStats
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage
from service.state.link_state import LinkState, StateView
from service.topology.topology import Topology

#: The first minute the tests feed (an epoch minute in 2025).
START = 29_000_000
BASE_MS = 20.0
JITTER_MS = 0.2


class Mesh:
    """`sites` sites of `hosts` hosts each, every host measuring every other (directed)."""

    def __init__(self, sites: int = 6, hosts: int = 1) -> None:
        self.site_names = [f"SITE-{s}" for s in range(sites)]
        self.host_names = [f"ps{h}.site{s}.example.org" for s in range(sites) for h in range(hosts)]
        self.host_site = [f"SITE-{s}" for s in range(sites) for _ in range(hosts)]
        self.ips = [f"10.0.{i}.1" for i in range(len(self.host_names))]
        mapping: dict[str, list[str]] = {}
        for host, site in zip(self.host_names, self.host_site, strict=True):
            mapping.setdefault(site, []).append(host)
        self.state = LinkState(Topology.from_mapping(mapping))
        count = len(self.host_names)
        self.links = [(s, d) for s in range(count) for d in range(count) if s != d]
        self.endpoints = [
            LinkEndpoints(self.ips[s], self.ips[d], self.host_names[s], self.host_names[d])
            for s, d in self.links
        ]

    def __len__(self) -> int:
        return len(self.links)

    def rows(self, test: Callable[[int, int], bool]) -> np.ndarray:
        """Link numbers (= state rows, in feeding order) whose (source, destination) hosts pass."""
        return np.array([i for i, (s, d) in enumerate(self.links) if test(s, d)], dtype=int)

    def feed(
        self,
        minute: int,
        loss: np.ndarray | float = 0.0,
        median: np.ndarray | float = BASE_MS,
        std: np.ndarray | float = JITTER_MS,
        silent: np.ndarray | None = None,
    ) -> None:
        """One minute of every link (but the `silent` ones): a loss datapoint, and a delay
        histogram's statistics unless every packet was lost."""
        n = len(self)
        loss_of, median_of, std_of = (np.broadcast_to(v, n) for v in (loss, median, std))
        quiet = np.zeros(n, bool) if silent is None else np.isin(np.arange(n), silent)
        ts = minute * 60
        messages = []
        for i, link in enumerate(self.endpoints):
            if quiet[i]:
                continue
            if loss_of[i] < 1.0:
                m, sd = float(median_of[i]), float(std_of[i])
                stats = HistogramStats(600, m, sd, m, m - 2 * sd, m + 2 * sd, m - 2 * sd < 0, 0)
                messages.append(ParsedMessage(MeasurementKind.DELAY, link, delays=[(ts, stats)]))
            messages.append(
                ParsedMessage(MeasurementKind.LOSS, link, losses=[(ts, float(loss_of[i]))])
            )
        self.state.apply_batch(messages, ts + 63)

    def view(self, minute: int, settle: float = 30.0) -> StateView:
        """The state as a cycle sees it once `minute` has settled."""
        return self.state.view((minute + 1) * 60 + settle + 1)


class Judge:
    """An engine over a mesh, called once per fed minute; collects the events."""

    def __init__(self, mesh: Mesh, rules: AlarmRules | None = None) -> None:
        self.mesh = mesh
        self.book = AlarmBook()
        self.engine = AlarmEngine(self.book, rules)
        self.events: list[AlarmEvent] = []
        self.book.add_listener(self.events.append)

    def minute(self, minute: int, probability: np.ndarray | None = None, **values: object) -> None:
        self.mesh.feed(minute, **values)  # type: ignore[arg-type]
        view = self.mesh.view(minute, self.engine.rules.settle_seconds)
        p = np.full(len(view), np.nan) if probability is None else probability
        self.book.record(self.engine.evaluate(view, p))

    def calm(self, minutes: range) -> None:
        for minute in minutes:
            self.minute(minute)

    def opened(self) -> list[AlarmEvent]:
        return [event for event in self.events if event.action == "open"]

    def closed(self) -> list[AlarmEvent]:
        return [event for event in self.events if event.action == "close"]
