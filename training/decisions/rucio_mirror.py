"""What Rucio's conveyor sees of the served cost: rucio-sync's writes and the topology cache.

rucio-sync reads the site-level costs every `interval` seconds (phase drawn per scenario) and
writes `baseline + penalty(cost)` where its hysteresis says so (`service.rucio.distances`, the
defaults); the conveyor daemons re-read the distances table every 300 s (a fixed cache, phase
drawn per scenario). A transfer requested at t is ranked by the distances of the last cache
refresh, which hold what the last sync before it wrote.
"""

from __future__ import annotations

import math

import numpy as np

from service.rucio.distances import PenaltyPolicy, penalty, penalty_level, worth_writing
from training.decisions.served_view import ViewHistory

#: Rucio's conveyor topology cache (seconds).
RUCIO_CACHE_SECONDS = 300.0
#: Every candidate pair starts at the same baseline distance ("equal baselines").
BASELINE = 1


class RucioMirror:
    """The distances Rucio ranks by at any time, given the served views (times increasing)."""

    def __init__(
        self,
        candidates: int,
        interval_s: float,
        sync_phase_s: float,
        cache_phase_s: float,
        policy: PenaltyPolicy | None = None,
    ) -> None:
        self.interval_s = interval_s
        self._sync_phase = sync_phase_s % interval_s
        self._cache_phase = cache_phase_s % RUCIO_CACHE_SECONDS
        self._policy = policy or PenaltyPolicy()
        self._written = np.full(candidates, BASELINE, dtype=np.int64)
        self._next_sync = self._sync_phase
        self._seen = self._written.copy()
        self._seen_cache = -math.inf

    def cache_refreshed_at(self, t: float) -> float:
        """When the conveyor last re-read the distances, at or before `t`."""
        return self._cache_phase + RUCIO_CACHE_SECONDS * math.floor(
            (t - self._cache_phase) / RUCIO_CACHE_SECONDS
        )

    def synced_at(self, t: float) -> float:
        """When the sync whose writes Rucio ranks by at `t` read nettel's costs."""
        refreshed = self.cache_refreshed_at(t)
        return self._sync_phase + self.interval_s * math.floor(
            (refreshed - self._sync_phase) / self.interval_s
        )

    def distances_at(self, t: float, history: ViewHistory) -> np.ndarray:
        """The distances the conveyor ranks by at `t` (call with increasing `t`)."""
        refreshed = self.cache_refreshed_at(t)
        if refreshed != self._seen_cache:
            while self._next_sync <= refreshed:
                self._sync(history, self._next_sync)
                self._next_sync += self.interval_s
            self._seen, self._seen_cache = self._written.copy(), refreshed
        return self._seen

    def _sync(self, history: ViewHistory, at: float) -> None:
        view = history.at(at)
        for path in range(len(self._written)):
            cost = None if view is None or not np.isfinite(view.cost[path]) else view.cost[path]
            value = None if cost is None else float(cost)
            pain = penalty(value, self._policy)
            level = penalty_level(value, self._policy)
            target = BASELINE + pain
            if worth_writing(target, int(self._written[path]), pain, self._policy, level):
                self._written[path] = target
