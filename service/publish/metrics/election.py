"""High availability: whether this replica publishes telemetry, and its --ha-group election."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from service.broker.election import BrokerElection
from service.publish.metrics.families import AlwaysCollected


class ElectionCollector(AlwaysCollected):
    def __init__(self, election: BrokerElection | None, publishes: Callable[[], bool]) -> None:
        """`publishes`: whether this instance publishes telemetry now."""
        self._election = election
        self._publishes = publishes

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        election = self._election
        yield GaugeMetricFamily(
            "nettel_ha_leader",
            "1 while this instance is its --ha-group's telemetry publisher (without a group: 1 "
            "when it publishes telemetry at all).",
            value=1.0 if self._publishes() else 0.0,
        )
        yield GaugeMetricFamily(
            "nettel_ha_lease_shared",
            "1 while the --ha-group's lease queue hands tokens to more than one replica (a "
            "RabbitMQ queue declared without x-single-active-consumer: every replica may "
            "publish).",
            value=1.0 if election is not None and election.lease_shared else 0.0,
        )
        yield CounterMetricFamily(
            "nettel_ha_transitions",
            "Role changes (standby, acquiring, leader) in this replica's --ha-group election.",
            value=0 if election is None else election.transitions,
        )
