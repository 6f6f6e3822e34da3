"""Link state: links tracked, the limit, those in no site of --topology, and those retired."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from service.publish.metrics.families import AlwaysCollected
from service.state.link_state import LinkState


class LinkStateCollector(AlwaysCollected):
    def __init__(self, state: LinkState, max_links: int) -> None:
        self._state = state
        self._max_links = max_links

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        state = self._state
        yield GaugeMetricFamily(
            "nettel_links_tracked", "Directed links in state.", value=len(state)
        )
        yield GaugeMetricFamily(
            "nettel_links_limit",
            "Links the state holds at most (--max-links); new ones beyond are refused.",
            value=self._max_links,
        )
        yield CounterMetricFamily(
            "nettel_links_retired",
            "Links removed from state after --retire-after without a datapoint.",
            value=state.retired_total,
        )
        yield GaugeMetricFamily(
            "nettel_links_unmapped",
            "Links with an end that no site of --topology matches (all links without one).",
            value=state.index.unmapped,
        )
