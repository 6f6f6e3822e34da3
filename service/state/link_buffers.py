"""Columnar link state: every link's last 32 one-minute slots plus archived all-time moments.

Slot `minute % WINDOW_MINUTES` of a row holds that minute's values; `slot_minute` says which
minute a slot currently holds (-1: empty). A minute pushed out of the window is folded into the
row's archived moments, so all-time statistics are exact, idempotent under repeated datapoints
and need no unbounded history.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from service.state.running_stats import add_values

WINDOW_MINUTES = 32
SERIES = ("delay_mean", "delay_median", "delay_std", "delay_min", "loss")
ARCHIVE = ("delay_n", "delay_mean", "delay_m2", "delay_min", "loss_n", "loss_mean", "loss_m2")
#: Minute counts are exact in float32 for 31 years of minutes; the moments need float64.
_ARCHIVE_DTYPES = {"delay_n": np.float32, "loss_n": np.float32}


class Datapoints(NamedTuple):
    """Datapoints to store, one entry per datapoint; delay columns are unused for a loss."""

    rows: np.ndarray
    minutes: np.ndarray
    is_loss: np.ndarray
    loss: np.ndarray
    mean: np.ndarray
    median: np.ndarray
    std: np.ndarray
    minimum: np.ndarray
    p95: np.ndarray
    clock_suspect: np.ndarray

    def take(self, which: np.ndarray) -> Datapoints:
        """The datapoints selected by an index or mask array, in order."""
        return Datapoints._make(column[which] for column in self)


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

    def write(self, points: Datapoints) -> np.ndarray:
        """Store `points` with the result of writing them one by one, in order.

        Returns, per datapoint, False when its minute had already left its row's window. Each
        round of writes holds a row at most once, so fancy-indexed assignments never collide.
        """
        stored = np.zeros(len(points.rows), dtype=bool)
        for taken in _rounds(points.rows):
            stored[taken] = self._write_round(points.take(taken))
        return stored

    def write_with_history(
        self, points: Datapoints, older: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Fold the `older` datapoints (before the window) straight into the archived moments
        where no minute can be counted twice, then `write` the others, oldest minute first: the
        moments come out as if the minutes had arrived one by one and left the window.

        That is where a row has archived nothing yet and does not hold the minute: every minute
        a row ever stored is then still held, so a row's whole history must come in one call.
        Of a minute given twice, the last value is taken. Returns (stored, folded) per datapoint.
        """
        old = np.flatnonzero(older)
        history = points.take(old)
        rows, minutes = history.rows, history.minutes
        fresh = (self.archive["delay_n"][rows] == 0) & (self.archive["loss_n"][rows] == 0)
        held = self.slot_minute[rows, minutes % WINDOW_MINUTES] == minutes
        folding = fresh & ~held & _last_of_each(rows, history.is_loss, minutes)
        self._fold(history.take(np.flatnonzero(folding)))
        recent = np.flatnonzero(~older)
        recent = recent[np.argsort(points.minutes[recent], kind="stable")]
        stored = np.zeros(len(points.rows), dtype=bool)
        stored[old] = folding
        stored[recent] = self.write(points.take(recent))
        return stored, older & stored

    def _fold(self, points: Datapoints) -> None:
        """Archive `points` oldest minute first, one value per row at a time, as the window
        stores them (float32), as eviction from the window would."""
        points = points.take(np.argsort(points.minutes, kind="stable"))
        np.maximum.at(self.latest_minute, points.rows, points.minutes.astype(np.int32))
        for quantity, chosen, values in (
            ("delay", ~points.is_loss, points.mean),
            ("loss", points.is_loss, points.loss),
        ):
            rows, values = points.rows[chosen], values[chosen].astype(np.float32)
            for taken in _rounds(rows):
                self._archive(rows[taken], values[taken], quantity)

    def _write_round(self, points: Datapoints) -> np.ndarray:
        rows, minutes = points.rows, points.minutes
        slots = minutes % WINDOW_MINUTES
        held = self.slot_minute[rows, slots]
        fits: np.ndarray = held <= minutes
        leaving = fits & (held < minutes)
        self._evict(rows[leaving], slots[leaving], held[leaving])
        self.slot_minute[rows[leaving], slots[leaving]] = minutes[leaving]
        points, slots = points.take(fits), slots[fits]
        rows, minutes = points.rows, points.minutes
        self.latest_minute[rows] = np.maximum(self.latest_minute[rows], minutes)
        loss = points.is_loss
        self.series["loss"][rows[loss], slots[loss]] = points.loss[loss]
        delay = ~loss
        rows, slots, minutes = rows[delay], slots[delay], minutes[delay]
        values = (points.mean, points.median, points.std, points.minimum)
        for name, value in zip(SERIES[:4], values, strict=True):
            self.series[name][rows, slots] = value[delay]
        newer = minutes >= self.latest_delay_minute[rows]
        self.latest_delay_minute[rows[newer]] = minutes[newer]
        self.latest_p95[rows[newer]] = points.p95[delay][newer]
        suspect = points.clock_suspect[delay]
        rows, minutes = rows[suspect], minutes[suspect]
        self.clock_suspect_minute[rows] = np.maximum(self.clock_suspect_minute[rows], minutes)
        return fits

    def keep_rows(self, keep: np.ndarray, n: int) -> None:
        """Move rows `keep` (ascending, below `n`) to the front in their order and empty rows
        `len(keep)` to `n`, which new links then reuse: one fancy-indexed copy per array."""
        kept = len(keep)
        for array, fill in self._columns():
            array[:kept] = array[keep]
            array[kept:n] = fill

    def _columns(self) -> list[tuple[np.ndarray, float]]:
        """Every per-row array with the value of an empty row."""
        columns: list[tuple[np.ndarray, float]] = [(self.slot_minute, -1)]
        columns += [(values, np.nan) for values in self.series.values()]
        columns += [(v, np.inf if k == "delay_min" else 0.0) for k, v in self.archive.items()]
        columns += [(self.latest_delay_minute, -1), (self.latest_p95, np.nan)]
        return columns + [(self.latest_minute, -1), (self.clock_suspect_minute, -1)]

    def nbytes_per_link(self) -> int:
        arrays = [self.slot_minute, *self.series.values(), *self.archive.values()]
        arrays += [self.latest_delay_minute, self.latest_p95, self.latest_minute]
        arrays.append(self.clock_suspect_minute)
        return sum(a.nbytes for a in arrays) // max(self.capacity, 1)

    def _evict(self, rows: np.ndarray, slots: np.ndarray, held_minutes: np.ndarray) -> None:
        """Fold the values of the minutes leaving `slots` into their rows' archived moments."""
        held = held_minutes >= 0
        self._archive(rows[held], self.series["delay_mean"][rows[held], slots[held]], "delay")
        self._archive(rows[held], self.series["loss"][rows[held], slots[held]], "loss")
        for values in self.series.values():
            values[rows, slots] = np.nan

    def _archive(self, rows: np.ndarray, values: np.ndarray, quantity: str) -> None:
        present = ~np.isnan(values)
        rows, values = rows[present], values[present].astype(np.float64)
        n, mean, m2 = (self.archive[f"{quantity}_{name}"] for name in ("n", "mean", "m2"))
        n[rows], mean[rows], m2[rows] = add_values(n[rows], mean[rows], m2[rows], values)
        if quantity == "delay":
            minimum = self.archive["delay_min"]
            minimum[rows] = np.minimum(minimum[rows], values)

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


def _last_of_each(rows: np.ndarray, is_loss: np.ndarray, minutes: np.ndarray) -> np.ndarray:
    """Mask of the last datapoint of each (row, quantity, minute), in the given order."""
    order = np.lexsort((np.arange(len(rows)), minutes, is_loss, rows))
    keys = np.stack([rows, is_loss, minutes])[:, order]
    last = np.ones(len(rows), dtype=bool)
    last[:-1] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
    mask = np.zeros(len(rows), dtype=bool)
    mask[order[last]] = True
    return mask


def _rounds(rows: np.ndarray) -> list[np.ndarray]:
    """Indices grouped so that each group holds a row at most once; round k has every row's k-th."""
    if len(rows) == 0:
        return []
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    occurrence = np.empty(len(rows), dtype=np.int64)
    occurrence[order] = np.arange(len(rows)) - np.repeat(starts, np.diff(np.r_[starts, len(rows)]))
    if occurrence.max() == 0:
        return [np.arange(len(rows))]
    return [np.flatnonzero(occurrence == k) for k in range(occurrence.max() + 1)]
