"""Each link's delay baseline beyond the 32-minute window, in a fixed number of bytes per link.

A decaying log-histogram per link, all links in one numpy array (`BINS` x links: a bin of
every link is one contiguous row, so reading quantiles is `BINS` vector operations), fed one
value per link and minute (the minute's delay median, as AAAS's baseline reads `delay_median`):

- Bins are powers of `GAMMA` (8 % wide): global bin k holds delays in [GAMMA^k, GAMMA^(k+1))
  ms. A link keeps `BINS` consecutive ones from its own `offset`, set from the first value it
  gets so that the value sits in bin `ANCHOR_BIN`: 0.63 to 7.4 times that first value. Values
  beyond go to the end bins (clamped); when the clamped weight of an end bin passes half of a
  link's weight (the delay moved for good, e.g. a new route), the link's window moves to the
  new values and its old weight is merged into the bins the new window has.
- Forward decay: a minute's value weighs `exp((minute - epoch) / TAU_MINUTES)`, growing with
  time instead of decaying every bin every minute; quantiles and means are ratios, so this is
  exponential forgetting with time constant `TAU_MINUTES` (3.5 days: the mean age of a
  sliding 7-day window; 86 % of the weight lies in the last 7 days). When the weights grow
  large, everything is scaled down once (`_RESCALE_AFTER`).
- Beside the bins: the weighted sum of the values (the mean is exact, not binned) and of the
  log of each minute's delay standard deviation (the link's usual jitter, which tells queueing
  from a step in the delay).

p25, p75 and p95 are read by interpolating within the bin (relative error within half a bin,
about 4 %); the weight over the weight of one minute now is the baseline's size in minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BINS = 32
GAMMA = 1.08
ANCHOR_BIN = 6
#: Values at or below this (ms) count as this when placed: log bins need a positive delay.
FLOOR_MS = 0.01
#: The decay's time constant: the mean age of the weight of a sliding 7-day baseline.
TAU_MINUTES = 3.5 * 1440
#: Weights are scaled down once the newest exceeds exp(this).
_RESCALE_AFTER = 30.0
_LOG_GAMMA = float(np.log(GAMMA))
#: `offset` of a link without weight yet.
EMPTY = np.iinfo(np.int16).min
#: Bytes the baseline keeps per link: the bins, the two weighted sums and the window's offset.
BYTES_PER_LINK = BINS * 4 + 4 + 4 + 2


@dataclass(frozen=True)
class BaselineStats:
    """Per link: weighted quantiles and mean of the minute medians (ms), the usual jitter (ms),
    and the baseline's size in minutes (NaN where a link has none)."""

    p25: np.ndarray
    p75: np.ndarray
    p95: np.ndarray
    mean: np.ndarray
    jitter: np.ndarray
    minutes: np.ndarray

    @property
    def iqr(self) -> np.ndarray:
        return np.asarray(self.p75 - self.p25)


class DelayBaseline:
    """Decaying log-histograms of every link's minute delay medians (rows = the engine's rows)."""

    def __init__(self, capacity: int = 0, epoch_minute: int = 0) -> None:
        self.weights = np.zeros((BINS, capacity), np.float32)
        self.value_sum = np.zeros(capacity, np.float32)
        self.log_jitter_sum = np.zeros(capacity, np.float32)
        #: Global bin of each link's bin 0 (EMPTY: no weight yet).
        self.offset = np.full(capacity, EMPTY, np.int16)
        self.epoch_minute = epoch_minute

    def __len__(self) -> int:
        return len(self.offset)

    def nbytes(self) -> int:
        arrays = (self.weights, self.value_sum, self.log_jitter_sum, self.offset)
        return sum(array.nbytes for array in arrays)

    def resize(self, rows: int) -> None:
        """Keep rows 0 .. rows-1 (new rows empty)."""
        self.take(np.arange(rows), rows)

    def take(self, old_rows: np.ndarray, rows: int) -> None:
        """Row i of the result is old row `old_rows[i]` (-1: a new, empty row); `rows` rows."""
        picked = np.full(rows, -1, np.int64)
        picked[: len(old_rows)] = old_rows[:rows]
        kept = picked >= 0
        source = np.where(kept, picked, 0)

        def pick(array: np.ndarray, fill: int = 0) -> np.ndarray:
            result = np.full((*array.shape[:-1], rows), fill, array.dtype)
            if array.shape[-1]:
                result[..., kept] = array[..., source[kept]]
            return result

        self.weights = pick(self.weights)
        self.value_sum = pick(self.value_sum)
        self.log_jitter_sum = pick(self.log_jitter_sum)
        self.offset = pick(self.offset, EMPTY)

    def add(self, rows: np.ndarray, medians: np.ndarray, stds: np.ndarray, minute: int) -> None:
        """Fold one minute's delay median and standard deviation (ms) of each of `rows`
        (distinct) into their baselines."""
        present = ~(np.isnan(medians) | np.isnan(stds))
        rows, medians, stds = rows[present], medians[present], stds[present]
        if not len(rows):
            return
        weight = self.weight_of(minute)
        empty = self.offset[rows] == EMPTY
        self.offset[rows[empty]] = global_bin(medians[empty]) - ANCHOR_BIN
        local = global_bin(medians) - self.offset[rows].astype(np.int64)
        self.weights[np.clip(local, 0, BINS - 1), rows] += np.float32(weight)  # rows distinct
        self.value_sum[rows] += np.float32(weight) * medians.astype(np.float32)
        log_jitter = np.log(np.maximum(stds, FLOOR_MS)).astype(np.float32)
        self.log_jitter_sum[rows] += np.float32(weight) * log_jitter
        outside = (local < 0) | (local >= BINS)
        if outside.any():
            self.follow(rows[outside], medians[outside])

    def stats(self, now_minute: int, rows: slice | np.ndarray = slice(None)) -> BaselineStats:
        """The baseline statistics of the links in `rows` (all by default)."""
        cumulative = cumulative_bins(self.weights[:, rows])
        total = cumulative[-1].astype(np.float64)
        has = total > 0
        safe = np.where(has, total, 1.0)
        offset = self.offset[rows]
        p25, p75, p95 = (
            np.where(has, binned_quantile(cumulative, q * total, offset), np.nan)
            for q in (0.25, 0.75, 0.95)
        )
        mean = np.where(has, self.value_sum[rows] / safe, np.nan)
        jitter = np.where(has, np.exp(self.log_jitter_sum[rows] / safe), np.nan)
        minutes = total / self.weight_of(now_minute)
        return BaselineStats(p25, p75, p95, mean, jitter, minutes)

    def weight_of(self, minute: int) -> float:
        """A minute's weight; rescales every weight first when it would grow too large."""
        age = (minute - self.epoch_minute) / TAU_MINUTES
        if age > _RESCALE_AFTER:
            scale = np.float32(np.exp(-age))
            self.weights *= scale
            self.value_sum *= scale
            self.log_jitter_sum *= scale
            self.epoch_minute = minute
            age = 0.0
        return float(np.exp(age))

    def follow(self, rows: np.ndarray, medians: np.ndarray) -> None:
        """Move the window of the rows whose clamped end bin holds over half their weight to
        their newest value, merging the old bins into the new window's."""
        weights = self.weights[:, rows].T
        total = weights.sum(axis=1)
        moved = (weights[:, 0] > total / 2) | (weights[:, -1] > total / 2)
        rows, medians, weights = rows[moved], medians[moved], weights[moved]
        if not len(rows):
            return
        new_offset = global_bin(medians) - ANCHOR_BIN
        shift = self.offset[rows].astype(np.int64) - new_offset
        target = np.clip(np.arange(BINS)[None, :] + shift[:, None], 0, BINS - 1)
        merged = np.zeros_like(weights)
        np.add.at(merged, (np.arange(len(rows))[:, None], target), weights)
        self.weights[:, rows] = merged.T
        self.offset[rows] = new_offset


def binned_quantile(cumulative: np.ndarray, level: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Where each link's cumulative weight (bins x links) reaches `level`, linear within the
    bin in log space: one pass over the bins, each a few vector operations over the links."""
    bin_index = np.zeros(cumulative.shape[1], np.int64)
    below = np.zeros(cumulative.shape[1], np.float32)
    for row in cumulative[:-1]:
        short = row < level
        bin_index += short
        np.copyto(below, row, where=short)
    reached = cumulative[-1].copy()
    for row in cumulative[-2::-1]:  # the first bin reaching `level`, from the top down
        np.copyto(reached, row, where=row >= level)
    inside = (reached - below).astype(np.float64)
    fraction = np.clip((level - below) / np.where(inside > 0, inside, 1.0), 0.0, 1.0)
    exponent = offset.astype(np.float64) + bin_index + fraction
    return np.asarray(np.exp(exponent * _LOG_GAMMA))


def cumulative_bins(weights: np.ndarray) -> np.ndarray:
    """Running sums over the bins (bins x links), one vector addition per bin."""
    cumulative = np.empty_like(weights)
    np.cumsum(weights[:1], axis=0, out=cumulative[:1])
    for bin_number in range(1, len(weights)):
        np.add(cumulative[bin_number - 1], weights[bin_number], out=cumulative[bin_number])
    return cumulative


def global_bin(values: np.ndarray) -> np.ndarray:
    """The global log bin of each delay (ms); values at or below FLOOR_MS go to its bin."""
    logged = np.log(np.maximum(values.astype(np.float64), FLOOR_MS)) / _LOG_GAMMA
    return np.floor(logged).astype(np.int64)
