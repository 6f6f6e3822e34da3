"""What the collectors share: a labelled counter, and describing a collector by collecting it."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector


def labelled_counter(
    name: str, doc: str, label: str, values: dict[str, int]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family


class AlwaysCollected(Collector):
    """A collector that yields the same families at every scrape: it describes itself by them."""

    def describe(self) -> Iterable[Metric]:
        return list(self.collect())
