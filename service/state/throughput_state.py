"""Per-link throughput results: the latest one with its retransmits, and three weeks of history.

perfSONAR runs a throughput test per pair every few hours. Each link keeps:
- its latest result: rate (bits/s) and start time, and the latest retransmit count with its
  time (the bus carries the two on separate topics; they belong together when the times match);
- a ring of `BINS` bins of `BIN_SECONDS` (4 days, aligned to the epoch), each the count and sum
  of the results that began in it: the current bin and the five before cover the 21 days of
  OSG's Alarms and Alerts (AAAS) "bandwidth decreased/increased" rule, which compares the mean
  of the newest 4-day bin with the means of all bins (z-score, and the change against their
  mean). Sums of squares are not needed: the rule's spread is that of the bin means.

A result newer than its link's latest is added to its bin (a result repeated in one batch once);
one at the latest's time replaces the latest value only (a re-post); an older one is refused as
too old: re-polled results cannot be told from new ones by time alone, so only results newer
than the link's latest are counted into the history.

Every column's empty value is 0 (a time or period of 0: none), so that the rows of links without
results take no resident memory (`RowColumns.grow_to`); reading translates (`latest`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from service.state.row_columns import ColumnSpec, RowColumns, first_of_each, newest_of_each

BIN_SECONDS = 4 * 86_400
BINS = 6
#: Ring slots hold a period number (epoch s // BIN_SECONDS); 0 is an empty slot, as a time of
#: 0 is no result.
COLUMNS = {
    "latest_bps": ColumnSpec(np.float64, 0.0),
    "latest_time": ColumnSpec(np.int64, 0),
    "retransmits": ColumnSpec(np.int64, 0),
    "retransmits_time": ColumnSpec(np.int64, 0),
    "bin_period": ColumnSpec(np.int32, 0, (BINS,)),
    "bin_count": ColumnSpec(np.int32, 0, (BINS,)),
    "bin_sum": ColumnSpec(np.float64, 0.0, (BINS,)),
}


class LatestThroughput(NamedTuple):
    """Per link: the latest rate (bits/s, NaN when none), its start (epoch s, -1 when none)
    and that test's retransmits (-1 when none arrived for it)."""

    bps: np.ndarray
    time: np.ndarray
    retransmits: np.ndarray


class BandwidthChange(NamedTuple):
    """Per link, AAAS's view of the newest 4-day bin against all bins with results:
    `z` = (newest mean - mean of means) / their standard deviation (ddof 1), `change` =
    (newest mean - mean of means) / mean of means, NaN where fewer than two bins have results,
    the newest has none, or the means do not vary; `bins`: bins with results."""

    z: np.ndarray
    change: np.ndarray
    newest_mean: np.ndarray
    bins: np.ndarray


class ThroughputState:
    """Throughput columns over link rows (not thread-safe: `LinkState` holds the lock)."""

    def __init__(self, capacity: int = 1024) -> None:
        self.columns = RowColumns(COLUMNS, capacity)

    @staticmethod
    def window_start(newest_allowed: float) -> int:
        """The earliest start a result may have when none may be after `newest_allowed`: the
        start of the oldest bin of the ring then (so one batch never needs a slot twice)."""
        return (int(newest_allowed) // BIN_SECONDS - (BINS - 1)) * BIN_SECONDS

    def add_rates(self, rows: np.ndarray, times: np.ndarray, bps: np.ndarray) -> np.ndarray:
        """Store results (inside the window) as if one by one in time order; per result,
        whether it was stored (False: older than its link's latest)."""
        c = self.columns
        before: np.ndarray = c["latest_time"][rows]
        newer, stored = times > before, times >= before
        first = first_of_each(rows, times)
        self._bin(rows[newer & first], times[newer & first], bps[newer & first])
        latest = newest_of_each(rows, times, stored)
        c["latest_bps"][rows[latest]] = bps[latest]
        c["latest_time"][rows[latest]] = times[latest]
        return stored

    def add_retransmits(
        self, rows: np.ndarray, times: np.ndarray, counts: np.ndarray
    ) -> np.ndarray:
        """Store retransmit counts: the newest per link is kept; older ones are not stored."""
        c = self.columns
        stored: np.ndarray = times >= c["retransmits_time"][rows]
        latest = newest_of_each(rows, times, stored)
        c["retransmits"][rows[latest]] = counts[latest]
        c["retransmits_time"][rows[latest]] = times[latest]
        return stored

    def _bin(self, rows: np.ndarray, times: np.ndarray, bps: np.ndarray) -> None:
        """Add results to their bins, emptying a slot that holds an older period first."""
        c = self.columns
        periods = times // BIN_SECONDS
        slots = periods % BINS
        older = c["bin_period"][rows, slots] < periods
        c["bin_period"][rows[older], slots[older]] = periods[older]
        c["bin_count"][rows[older], slots[older]] = 0
        c["bin_sum"][rows[older], slots[older]] = 0.0
        np.add.at(c["bin_count"], (rows, slots), 1)
        np.add.at(c["bin_sum"], (rows, slots), bps)

    def newest_time(self, n: int) -> np.ndarray:
        """Per row below `n`: the start of its newest result or retransmit count (0: none)."""
        c = self.columns
        newest: np.ndarray = np.maximum(c["latest_time"][:n], c["retransmits_time"][:n])
        return newest

    # --- reading ---------------------------------------------------------------------------

    def latest(self, rows: np.ndarray) -> LatestThroughput:
        c = self.columns
        time = c["latest_time"][rows]
        some = time > 0
        same_test = (c["retransmits_time"][rows] == time) & some
        return LatestThroughput(
            np.where(some, c["latest_bps"][rows], np.nan),
            np.where(some, time, -1),
            np.where(same_test, c["retransmits"][rows], -1),
        )

    def bin_means(self, rows: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Per link, the mean rate of each of the `BINS` periods ending with the one holding
        `now`, oldest first (NaN: no result), and the results in each."""
        c = self.columns
        periods = int(now) // BIN_SECONDS - (BINS - 1) + np.arange(BINS)
        slots = periods % BINS
        held = c["bin_period"][rows][:, slots] == periods
        counts = np.where(held, c["bin_count"][rows][:, slots], 0)
        sums = np.where(held, c["bin_sum"][rows][:, slots], 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts > 0, sums / counts, np.nan)
        return means, counts

    def bandwidth_change(self, rows: np.ndarray, now: float) -> BandwidthChange:
        """AAAS's scores of the newest bin (see `BandwidthChange`)."""
        means, _ = self.bin_means(rows, now)
        present = ~np.isnan(means)
        bins = present.sum(axis=1)
        newest = means[:, -1]
        judged = (bins >= 2) & present[:, -1]
        safe = np.where(present, means, 0.0)
        count = np.maximum(bins, 1)
        average = safe.sum(axis=1) / count
        deviation = np.where(present, means - average[:, None], 0.0)
        spread = np.sqrt((deviation**2).sum(axis=1) / np.maximum(bins - 1, 1))
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.where(judged & (spread > 0), (newest - average) / spread, np.nan)
            change = np.where(judged & (spread > 0), (newest - average) / average, np.nan)
        return BandwidthChange(z, change, newest, bins)
