"""State snapshots (registered only with --state-dir)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from service.persistence.durability import Persistence
from service.publish.metrics.families import AlwaysCollected


class PersistenceCollector(AlwaysCollected):
    """Before this process's first snapshot the age counts from start, so
    NettelStateSnapshotStale fires when snapshots never succeed."""

    def __init__(self, persistence: Persistence, started_at: Callable[[], float]) -> None:
        self._persistence = persistence
        self._started_at = started_at

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        written_at = self._persistence.last_written_at
        yield GaugeMetricFamily(
            "nettel_state_snapshot_age_seconds",
            "Age of the last state snapshot this process wrote (since start when none yet).",
            value=time.time() - (written_at or self._started_at()),
        )
        duration = self._persistence.last_duration
        yield GaugeMetricFamily(
            "nettel_state_snapshot_duration_seconds",
            "Time to encode and write the last state snapshot (NaN: none yet).",
            value=math.nan if duration is None else duration,
        )
        damage = CounterMetricFamily(
            "nettel_journal_damaged_records",
            "Damaged stretches of the journal found by the replay at start: torn (a crash "
            "mid-append, never acknowledged) or corrupt (skipped, the segment kept as .rejected).",
            labels=["kind"],
        )
        for kind in ("torn", "corrupt"):
            damage.add_metric([kind], self._persistence.journal_damage.get(kind, 0))
        yield damage
