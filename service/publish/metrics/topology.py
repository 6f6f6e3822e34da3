"""--topology (registered only with it): refreshes by outcome, and the age of the mapping in use."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from service.publish.metrics.families import AlwaysCollected, labelled_counter
from service.topology.refresh import TopologyRefresher


class TopologyCollector(AlwaysCollected):
    def __init__(self, refresher: TopologyRefresher) -> None:
        self._refresher = refresher

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        refresher = self._refresher
        outcomes = {outcome: refresher.outcomes[outcome] for outcome in ("ok", "failed")}
        yield labelled_counter(
            "nettel_topology_refreshes",
            "Re-reads of --topology, by outcome (failed: the old mapping stays).",
            "outcome",
            outcomes,
        )
        yield GaugeMetricFamily(
            "nettel_topology_age_seconds",
            "Time since the topology in use was read.",
            value=time.time() - refresher.loaded_at,
        )
