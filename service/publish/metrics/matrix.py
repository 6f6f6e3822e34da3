"""The served cost matrix: its age, congested links, the costliest site pairs, cycle times."""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.matrix.cycle import ServedMatrix
from service.matrix.link_record import LinkRecord
from service.matrix.snapshot import CostMatrix
from service.publish.publishers import SnapshotMemo

SitePairCost = tuple[str, str, float]
SiteLinks = Callable[[CostMatrix], Sequence[LinkRecord]]
CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SNAPSHOT_AGE = "nettel_snapshot_age_seconds"
CONGESTED_LINKS = "nettel_congested_links"
LINK_COST = "nettel_link_cost"


class MatrixCollector(Collector):
    """The latest snapshot's families (none before the first), site pairs aggregated once per
    snapshot, not per scrape."""

    def __init__(self, served: ServedMatrix, top: int, site_links: SiteLinks | None = None) -> None:
        """`top`: how many of the costliest site pairs to export; `site_links`: the matrix
        aggregated by site pair, when a publisher has it."""
        self._served = served
        self._top = top
        by_site = site_links or (lambda matrix: matrix.site_links)
        self._costliest = SnapshotMemo(lambda matrix: costliest_site_pairs(by_site(matrix), top))

    def prepare(self, matrix: CostMatrix) -> None:
        """The costliest site pairs of a new snapshot, before it is served (a matrix cycle's
        snapshot preparer): a scrape only reads them."""
        self._costliest(matrix)

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(name, "") for name in (SNAPSHOT_AGE, CONGESTED_LINKS, LINK_COST)]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        matrix = self._served.latest
        if matrix is None:
            return
        yield GaugeMetricFamily(
            SNAPSHOT_AGE, "Age of the served cost matrix.", value=time.time() - matrix.generated_at
        )
        yield GaugeMetricFamily(
            CONGESTED_LINKS,
            "Links the empirical filter marks congested.",
            value=matrix.congested_count,
        )
        family = GaugeMetricFamily(
            LINK_COST,
            f"Cost (0..1) between two sites as /costmatrix?level=site gives it, for the "
            f"{self._top} costliest site pairs.",
            labels=["source_site", "destination_site"],
        )
        for source, destination, cost in self._costliest(matrix):
            family.add_metric([source, destination], cost)
        yield family


def costliest_site_pairs(site_links: Sequence[LinkRecord], top: int) -> list[SitePairCost]:
    """The `top` costliest (source site, destination site, cost) of site-level links, costliest
    first; pairs without a cost are left out."""
    pairs = [
        (pair["source"], pair["destination"], pair["cost"])
        for pair in site_links
        if pair["cost"] is not None
    ]
    return heapq.nlargest(top, pairs, key=lambda pair: pair[2])


class MatrixMetrics:
    """The snapshot's families, its costliest site pairs (`prepare`d in the cycle) and the
    cycle's duration (`observe_seconds` as it recomputes); `register` adds them to /metrics."""

    def __init__(self, served: ServedMatrix, top: int, site_links: SiteLinks | None) -> None:
        self.collector = MatrixCollector(served, top, site_links)
        self.cycle_seconds = Histogram(
            "nettel_cycle_duration_seconds",
            "Time to recompute the cost matrix.",
            buckets=CYCLE_BUCKETS,
            registry=None,
        )
        self.prepare = self.collector.prepare
        self.observe_seconds = self.cycle_seconds.observe

    def register(self, registry: CollectorRegistry) -> None:
        registry.register(self.collector)
        registry.register(self.cycle_seconds)
