"""The delay histograms of a batch of documents, as both parsers (perfsonar, pscheduler) read
them: each one's buckets, scanned by histogram_scan or read here from a JSON object and checked,
and then the statistics of all of them computed at once."""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

from service.errors import RejectedInput, RejectReason
from service.parse.histogram import compute_histogram_batch, parse_bucket_delays
from service.parse.histogram_scan import ScannedBatch
from service.parse.json_fields import check_length
from service.parse.limits import InputLimits
from service.parse.records import ParsedMessage

#: A histogram's buckets: the index of a scanned one (see histogram_scan), or delays and counts.
HistogramSource = int | tuple[list[float], list[int]]
RawHistogram = tuple[int, HistogramSource]
#: A bucket holds at most this many packets (a minute has 600); larger counts are bad values.
MAX_BUCKET_COUNT = 10**9


def parse_buckets(value: Any, limits: InputLimits) -> tuple[list[float], list[int]]:
    """Bucket delays (key values) and counts of a histogram object, checked against `limits`."""
    if not isinstance(value, dict):
        raise RejectedInput(RejectReason.BAD_VALUE, "histogram is not an object")
    if not value:
        raise RejectedInput(RejectReason.EMPTY, "histogram has no buckets")
    if len(value) > limits.max_buckets:
        raise RejectedInput(RejectReason.TOO_LARGE, f"{len(value)} buckets")
    check_length(max(value, key=len), "bucket delay", limits)
    counts = list(value.values())
    if set(map(type, counts)) != {int} or not 0 <= min(counts) <= max(counts) <= MAX_BUCKET_COUNT:
        raise RejectedInput(RejectReason.BAD_VALUE, "bucket count is not a count")
    try:
        return parse_bucket_delays(list(value)), counts
    except ValueError as error:
        raise RejectedInput(RejectReason.BAD_VALUE, str(error)[:80]) from None


def add_histogram_stats(
    histograms: list[tuple[ParsedMessage, RawHistogram]], scan: ScannedBatch
) -> None:
    """Statistics of the scanned histograms (all of them) and of the parsed ones, in one batch."""
    parsed = [source for _, (_, source) in histograms if isinstance(source, tuple)]
    lengths = [len(delays) for delays, _ in parsed]
    total = sum(lengths)
    delays = np.fromiter(chain.from_iterable(delays for delays, _ in parsed), np.float64, total)
    counts = np.fromiter(chain.from_iterable(counts for _, counts in parsed), np.int64, total)
    stats = compute_histogram_batch(
        np.concatenate([scan.delays, delays]),
        np.concatenate([scan.counts, counts]),
        np.concatenate([scan.lengths, np.asarray(lengths, dtype=np.int64)]),
    )
    next_parsed = iter(range(len(scan.lengths), len(stats)))
    for message, (ts, source) in histograms:
        result = stats[source if type(source) is int else next(next_parsed)]
        if result is None:
            message.rejected.append((RejectReason.CLOCK_ERROR, "no packet with a plausible delay"))
        else:
            message.delays.append((ts, result))
