"""Statistics of one one-way delay histogram (delay in ms -> packet count), computed exactly."""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Delays at or beyond these bounds (ms) come from broken clocks and are dropped (WLCG practice).
CLOCK_ERROR_LOW_MS = -1000.0
CLOCK_ERROR_HIGH_MS = 50000.0


@dataclass(frozen=True, slots=True)
class HistogramStats:
    """Per-minute delay statistics in milliseconds; `clock_suspect` marks kept negative delays."""

    packets: int
    mean: float
    std: float
    median: float
    minimum: float
    p95: float
    clock_suspect: bool
    dropped_packets: int


def compute_histogram_stats(buckets: list[tuple[float, int]]) -> HistogramStats | None:
    """Return the statistics of `buckets` ((delay_ms, count) pairs), or None when no packet is left.

    Mean and population standard deviation are weighted by count; the median is the midpoint of
    the two middle packets for an even count; p95 is the nearest-rank 95th percentile.

    >>> s = compute_histogram_stats([(2.0, 1), (4.0, 2), (10.0, 1)])
    >>> (s.packets, s.mean, s.median, s.minimum, s.p95)
    (4, 5.0, 4.0, 2.0, 10.0)
    """
    kept = sorted(
        (d, c) for d, c in buckets if CLOCK_ERROR_LOW_MS < d < CLOCK_ERROR_HIGH_MS and c > 0
    )
    dropped = sum(c for d, c in buckets if c > 0) - sum(c for _, c in kept)
    packets = sum(c for _, c in kept)
    if packets == 0:
        return None
    mean = math.fsum(d * c for d, c in kept) / packets
    variance = math.fsum(c * (d - mean) ** 2 for d, c in kept) / packets
    lower_mid, upper_mid = _ranked(kept, [(packets + 1) // 2, packets // 2 + 1])
    (p95,) = _ranked(kept, [math.ceil(0.95 * packets)])
    return HistogramStats(
        packets=packets,
        mean=mean,
        std=math.sqrt(variance),
        median=lower_mid if packets % 2 else (lower_mid + upper_mid) / 2,
        minimum=kept[0][0],
        p95=p95,
        clock_suspect=kept[0][0] < 0,
        dropped_packets=dropped,
    )


def _ranked(sorted_buckets: list[tuple[float, int]], ranks: list[int]) -> list[float]:
    """Delay of the packet at each 1-based rank (ranks ascending) in sorted buckets."""
    out: list[float] = []
    cumulative = 0
    pending = iter(ranks)
    rank = next(pending, None)
    for delay, count in sorted_buckets:
        cumulative += count
        while rank is not None and rank <= cumulative:
            out.append(delay)
            rank = next(pending, None)
        if rank is None:
            break
    return out
