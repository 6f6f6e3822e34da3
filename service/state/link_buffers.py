"""Columnar link state: every link's last 32 one-minute slots plus archived all-time moments.

Slot `minute % WINDOW_MINUTES` of a row holds that minute's values; `slot_minute` says which
minute a slot currently holds (-1: empty). A minute pushed out of the window is folded into the
row's archived moments, so all-time statistics are exact, idempotent under repeated datapoints
and need no unbounded history.
"""

from __future__ import annotations

import numpy as np

from service.parse.histogram import HistogramStats
from service.state.running_stats import add_value

WINDOW_MINUTES = 32
SERIES = ("delay_mean", "delay_median", "delay_std", "delay_min", "loss")
ARCHIVE = ("delay_n", "delay_mean", "delay_m2", "delay_min", "loss_n", "loss_mean", "loss_m2")
#: Minute counts are exact in float32 for 31 years of minutes; the moments need float64.
_ARCHIVE_DTYPES = {"delay_n": np.float32, "loss_n": np.float32}


class LinkBuffers:
    """Numpy arrays over links (rows) x slots, grown by doubling, updated in place."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = 0
        self.slot_minute = np.empty((0, WINDOW_MINUTES), np.int32)
        self.series = {name: np.empty((0, WINDOW_MINUTES), np.float32) for name in SERIES}
        self.archive = {
            name: np.empty(0, _ARCHIVE_DTYPES.get(name, np.float64)) for name in ARCHIVE
        }
        self.latest_delay_minute = np.empty(0, np.int32)
        self.latest_p95 = np.empty(0, np.float32)
        self.latest_minute = np.empty(0, np.int32)
        self.clock_suspect_minute = np.empty(0, np.int32)
        self._grow_to(capacity)

    def ensure_row(self, row: int) -> None:
        if row >= self.capacity:
            self._grow_to(max(row + 1, 2 * self.capacity))

    def slot_for(self, row: int, minute: int) -> int | None:
        """Slot for `minute` (emptied first if it held an older minute); None if too old."""
        slot = minute % WINDOW_MINUTES
        held = int(self.slot_minute[row, slot])
        if held > minute:
            return None
        if held < minute:
            self._evict(row, slot, held)
            self.slot_minute[row, slot] = minute
        self.latest_minute[row] = max(int(self.latest_minute[row]), minute)
        return slot

    def write_delay(self, row: int, minute: int, stats: HistogramStats) -> bool:
        """Store one minute's delay statistics; False when the minute left this row's window."""
        slot = self.slot_for(row, minute)
        if slot is None:
            return False
        values = (stats.mean, stats.median, stats.std, stats.minimum)
        for name, value in zip(SERIES[:4], values, strict=True):
            self.series[name][row, slot] = value
        if minute >= self.latest_delay_minute[row]:
            self.latest_delay_minute[row] = minute
            self.latest_p95[row] = stats.p95
        if stats.clock_suspect:
            self.clock_suspect_minute[row] = max(int(self.clock_suspect_minute[row]), minute)
        return True

    def write_loss(self, row: int, minute: int, loss: float) -> bool:
        """Store one minute's loss ratio; False when the minute already left this row's window."""
        slot = self.slot_for(row, minute)
        if slot is None:
            return False
        self.series["loss"][row, slot] = loss
        return True

    def nbytes_per_link(self) -> int:
        arrays = [self.slot_minute, *self.series.values(), *self.archive.values()]
        arrays += [self.latest_delay_minute, self.latest_p95, self.latest_minute]
        arrays.append(self.clock_suspect_minute)
        return sum(a.nbytes for a in arrays) // max(self.capacity, 1)

    def _evict(self, row: int, slot: int, held_minute: int) -> None:
        """Fold the values of the minute leaving `slot` into the row's archived moments."""
        if held_minute >= 0:
            self._archive_delay(row, float(self.series["delay_mean"][row, slot]))
            self._archive_loss(row, float(self.series["loss"][row, slot]))
        for values in self.series.values():
            values[row, slot] = np.nan

    def _archive_delay(self, row: int, delay: float) -> None:
        if np.isnan(delay):
            return
        a = self.archive
        a["delay_n"][row], a["delay_mean"][row], a["delay_m2"][row] = add_value(
            a["delay_n"][row], a["delay_mean"][row], a["delay_m2"][row], delay
        )
        a["delay_min"][row] = min(a["delay_min"][row], delay)

    def _archive_loss(self, row: int, loss: float) -> None:
        if np.isnan(loss):
            return
        a = self.archive
        a["loss_n"][row], a["loss_mean"][row], a["loss_m2"][row] = add_value(
            a["loss_n"][row], a["loss_mean"][row], a["loss_m2"][row], loss
        )

    def _grow_to(self, capacity: int) -> None:
        extra = capacity - self.capacity
        self.slot_minute = _extend(self.slot_minute, extra, -1)
        self.series = {k: _extend(v, extra, np.nan) for k, v in self.series.items()}
        self.archive = {
            k: _extend(v, extra, np.inf if k == "delay_min" else 0.0)
            for k, v in self.archive.items()
        }
        self.latest_delay_minute = _extend(self.latest_delay_minute, extra, -1)
        self.latest_p95 = _extend(self.latest_p95, extra, np.nan)
        self.latest_minute = _extend(self.latest_minute, extra, -1)
        self.clock_suspect_minute = _extend(self.clock_suspect_minute, extra, -1)
        self.capacity = capacity


def _extend(array: np.ndarray, extra: int, fill: float) -> np.ndarray:
    """`array` with `extra` more rows filled with `fill`."""
    padding = np.full((extra, *array.shape[1:]), fill, dtype=array.dtype)
    return np.concatenate([array, padding])
