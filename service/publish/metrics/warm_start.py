"""How --warm-from ended at start (zeros without it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily

from service.persistence.snapshot_checks import ContentCheck
from service.persistence.warm_start import WarmOutcome
from service.publish.metrics.families import AlwaysCollected, labelled_counter


class WarmStartCollector(AlwaysCollected):
    def __init__(
        self,
        outcome: Callable[[], WarmOutcome | None],
        check: Callable[[], ContentCheck | None] = lambda: None,
    ) -> None:
        """`outcome`: how the warm start ended (None: without one, or not yet); `check`: the
        content check that refused its state (outcome `rejected`)."""
        self._outcome = outcome
        self._check = check

    def collect(self) -> Iterator[CounterMetricFamily]:
        ended = self._outcome()
        outcomes = {outcome.value: int(outcome is ended) for outcome in WarmOutcome}
        yield labelled_counter(
            "nettel_warm_start",
            "Warm starts from --warm-from at start, by outcome (loaded, or why not).",
            "outcome",
            outcomes,
        )
        refused_by = self._check()
        yield labelled_counter(
            "nettel_warm_start_rejected",
            "Warm-start states refused by a content check, by check (link_limit, "
            "duplicate_link, names, identity, future, window, range, archive).",
            "check",
            {check.value: int(check is refused_by) for check in ContentCheck},
        )
