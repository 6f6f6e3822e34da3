"""Delay histograms of a batch of message bodies, converted to arrays in C without JSON objects.

Decoding a histogram of ~100 buckets with a JSON library builds a string, an integer and a dict
slot per bucket: most of the cost of a delay message. `scan_histograms` has the C scanner
(`_histogram_scan.c`) find the histogram objects of the plain form toolkits write, convert
their buckets straight into arrays, and replace each in its body by a placeholder string that
the JSON library then decodes in a fraction of the time.

A body's placeholders stand for its histograms only when every one of them comes back as a
datapoint's value: then the body was valid JSON of the same shape with the histograms in those
places (the caller checks this, `ScannedBatch.placed`). A histogram that the general path would
read differently is marked `unusable`, and the caller parses its body whole: one with more buckets
than the limit (refused there), or with a delay that occurs twice (a JSON object keeps the last of
two equal keys, and the scanner cannot tell "2.6" twice from "2.6" and "2.60").

The extension is optional: `pip install` builds it when a C compiler is at hand. Without it
`scan_histograms` places nothing, so every body is decoded whole by orjson: the same results,
parsed about three times slower (`SCANNER_IMPLEMENTATION` says which path is in use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from service.parse.histogram import repeats_a_delay

#: Which scanner reads delay histograms (`nettel_build_info`): the C extension, or none ("python").
SCANNER_IMPLEMENTATION: Literal["c", "python"]
try:  # `import ... as`: a missing module raises ModuleNotFoundError, a broken one ImportError
    import service.parse._histogram_scan as _histogram_scan

    SCANNER_IMPLEMENTATION = "c"
except ModuleNotFoundError:  # built without a C compiler
    SCANNER_IMPLEMENTATION = "python"

#: Longest bucket key the scanner accepts ('-', 15 digits and a point); shorter string limits
#: than this would refuse keys the scanner reads, so no scan is made under them.
LONGEST_KEY = 17
_PLACEHOLDER_MARK = "\x00"  # decoded "\u0000", which no body without a backslash contains


@dataclass(frozen=True)
class ScannedBatch:
    """Bodies with placeholders, and the buckets of the histograms they replaced, in order."""

    documents: list[bytes]
    placed: list[int]
    delays: np.ndarray
    counts: np.ndarray
    lengths: np.ndarray
    unusable: np.ndarray

    @staticmethod
    def histogram_index(value: object) -> int | None:
        """The scanned histogram a decoded datapoint value stands for, or None for any other."""
        if type(value) is str and value[:1] == _PLACEHOLDER_MARK:
            return int(value[1:])
        return None


def scan_histograms(bodies: Sequence[bytes | str | None], max_buckets: int) -> ScannedBatch:
    """Scan every bytes body (others get no placeholders; none does without the extension)."""
    inputs = [body if type(body) is bytes else b"" for body in bodies]
    if SCANNER_IMPLEMENTATION == "python":
        return _nothing_placed(inputs)
    documents, placed, raw_delays, counts, raw_lengths = _histogram_scan.scan(inputs)
    delays = np.frombuffer(raw_delays, np.float64)
    lengths = np.frombuffer(raw_lengths, np.int64)
    return ScannedBatch(
        documents=documents,
        placed=np.frombuffer(placed, np.int64).tolist(),
        delays=delays,
        counts=np.frombuffer(counts, np.int64),
        lengths=lengths,
        unusable=(lengths > max_buckets) | repeats_a_delay(delays, lengths),
    )


def _nothing_placed(documents: list[bytes]) -> ScannedBatch:
    """A scan that stands for no histogram: the caller parses every body whole."""
    return ScannedBatch(
        documents=documents,
        placed=[0] * len(documents),
        delays=np.empty(0, np.float64),
        counts=np.empty(0, np.int64),
        lengths=np.empty(0, np.int64),
        unusable=np.empty(0, bool),
    )
