"""Statistics of one-way delay histograms (delay in ms -> packet count), computed exactly.

Histograms are processed in batches: the buckets of many datapoints are concatenated and the
statistics of all of them come from a fixed number of numpy operations, so the per-histogram
cost stays small when thousands arrive per second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

import numpy as np

#: Delays at or beyond these bounds (ms) come from broken clocks and are dropped (WLCG practice).
CLOCK_ERROR_LOW_MS = -1000.0
CLOCK_ERROR_HIGH_MS = 50000.0
#: Larger than the span of kept delays, so each histogram's sort keys have a range of their own.
_SEGMENT_SPAN = 2.0 ** np.ceil(np.log2(CLOCK_ERROR_HIGH_MS - CLOCK_ERROR_LOW_MS))
_KEY_CACHE_LIMIT = 1 << 16  # ~20 MB at worst (255-character hostile keys)


class HistogramStats(NamedTuple):
    """Per-minute delay statistics in milliseconds; `clock_suspect` marks kept negative delays.

    A named tuple, not a dataclass: parse workers send millions of these to the service process,
    and tuples cross that boundary (pickle) and are rebuilt several times faster.
    """

    packets: int
    mean: float
    std: float
    median: float
    minimum: float
    p95: float
    clock_suspect: bool
    dropped_packets: int


#: HistogramStats from a tuple of its fields in order, without a Python-level call per record.
_new_stats = partial(tuple.__new__, HistogramStats)


class _DelayKeys(dict[str, float]):
    """Memo of bucket key text -> delay; keys repeat across messages and float() dominates."""

    def __missing__(self, text: str) -> float:
        delay = float(text)
        if not math.isfinite(delay):
            raise ValueError(f"bucket delay {text!r} is not finite")
        if len(self) >= _KEY_CACHE_LIMIT:
            self.clear()
        self[text] = delay
        return delay


_DELAY_KEYS = _DelayKeys()


def parse_bucket_delays(keys: Sequence[str]) -> list[float]:
    """Delays (ms) of histogram bucket keys; ValueError for a non-numeric or non-finite key."""
    return list(map(_DELAY_KEYS.__getitem__, keys))


def compute_histogram_stats(buckets: list[tuple[float, int]]) -> HistogramStats | None:
    """Return the statistics of `buckets` ((delay_ms, count) pairs), or None when no packet is left.

    Mean and population standard deviation are weighted by count; the median is the midpoint of
    the two middle packets for an even count; p95 is the nearest-rank 95th percentile.

    >>> s = compute_histogram_stats([(2.0, 1), (4.0, 2), (10.0, 1)])
    >>> (s.packets, s.mean, s.median, s.minimum, s.p95)
    (4, 5.0, 4.0, 2.0, 10.0)
    """
    delays = [float(d) for d, _ in buckets]
    counts = [int(c) for _, c in buckets]
    return compute_histogram_batch(delays, counts, [len(buckets)])[0]


def compute_histogram_batch(
    delays: Sequence[float] | np.ndarray,
    counts: Sequence[int] | np.ndarray,
    lengths: Sequence[int] | np.ndarray,
) -> list[HistogramStats | None]:
    """Statistics of consecutive histograms whose buckets are concatenated in `delays`/`counts`.

    `lengths[i]` buckets belong to histogram i; None for a histogram with no plausible packet.
    """
    k = len(lengths)
    if k == 0:
        return []
    d = np.asarray(delays, dtype=np.float64)
    c = np.asarray(counts, dtype=np.int64)
    segment = np.repeat(np.arange(k), lengths)
    kept = (d > CLOCK_ERROR_LOW_MS) & (d < CLOCK_ERROR_HIGH_MS) & (c > 0)
    dropped = np.bincount(segment, weights=np.where(kept, 0, np.maximum(c, 0)), minlength=k)
    d, c, segment = d[kept], c[kept], segment[kept]
    order = _by_histogram_then_delay(d, segment)
    d, c, segment = d[order], c[order], segment[order]
    packets = np.bincount(segment, weights=c, minlength=k)
    safe = np.where(packets > 0, packets, 1.0)
    mean = np.bincount(segment, weights=d * c, minlength=k) / safe
    deviation = d - mean[segment]
    std = np.sqrt(np.bincount(segment, weights=c * deviation * deviation, minlength=k) / safe)
    n = packets.astype(np.int64)
    lower_mid, upper_mid, p95, minimum = _ranked_delays(d, c, packets)
    median = np.where(n % 2 == 1, lower_mid, (lower_mid + upper_mid) / 2)
    columns = (n, mean, std, median, minimum, p95, minimum < 0, dropped.astype(np.int64))
    stats = map(_new_stats, zip(*(column.tolist() for column in columns), strict=True))
    return [values if values.packets else None for values in stats]


def _by_histogram_then_delay(d: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """`np.lexsort((d, segment))`: the buckets sorted by histogram, then delay, ties kept in order.

    One argsort of `segment * span + delay` is ~15x faster. Its result is the same where every
    delay of a histogram is distinct (as bucket keys are, unless one number is written twice),
    which the check below confirms; with repeated delays, or should rounding of the key ever have
    misordered two of them, lexsort runs instead.
    """
    order = np.argsort(_sort_keys(d, segment))
    d_sorted, segment_sorted = d[order], segment[order]
    same_histogram = segment_sorted[1:] == segment_sorted[:-1]
    if np.all(segment_sorted[1:] >= segment_sorted[:-1]) and np.all(
        (d_sorted[1:] > d_sorted[:-1]) | ~same_histogram
    ):
        return order
    return np.lexsort((d, segment))


def repeats_a_delay(delays: np.ndarray, lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """Per histogram (`lengths` as in compute_histogram_batch): may two buckets share a delay?

    Never misses a repeat; delays beyond the clock-error bounds, or closer than the sort key
    resolves, may be reported as repeats too.
    """
    segment = np.repeat(np.arange(len(lengths)), lengths)
    clipped = np.clip(delays, CLOCK_ERROR_LOW_MS, CLOCK_ERROR_HIGH_MS)
    keys = np.sort(_sort_keys(clipped, segment))
    repeated = np.zeros(len(lengths), dtype=bool)
    repeated[(keys[1:][keys[1:] == keys[:-1]] // _SEGMENT_SPAN).astype(np.int64)] = True
    return repeated


def _sort_keys(d: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Keys that order buckets by histogram, then delay (for delays within the clock bounds)."""
    keys: np.ndarray = segment * _SEGMENT_SPAN + (d - CLOCK_ERROR_LOW_MS)
    return keys


def _ranked_delays(d: np.ndarray, c: np.ndarray, packets: np.ndarray) -> np.ndarray:
    """Rows: delay of packet rank (n+1)//2, n//2+1, ceil(0.95 n), 1 of each histogram (sorted)."""
    n = packets.astype(np.int64)
    before = np.concatenate([[0], np.cumsum(n)[:-1]])
    ranks = np.stack([(n + 1) // 2, n // 2 + 1, -((-95 * n) // 100), np.ones_like(n)])
    positions = np.searchsorted(np.cumsum(c), before + ranks, side="left")
    return d[np.minimum(positions, max(len(d) - 1, 0))] if len(d) else np.zeros(ranks.shape)
