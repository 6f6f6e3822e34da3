"""Memory housekeeping of the service's processes: garbage-collector pacing and heap trimming.

Ingest allocates about a hundred short-lived objects per message (parsed JSON, records), nearly
all freed by reference counting within the batch. CPython's default collector threshold (700
allocations) would run a collection every few messages, and each pass through the older
generations walks every live record; `relax_garbage_collection` raises the threshold and moves
the objects alive at start-up (modules, the model) out of the collector's sight. Cycles are still
collected, every 50,000 allocations instead of 700.

A cycle frees hundreds of MB of short-lived Python objects at 100,000 links; glibc keeps such
memory in its heap, so the process's RSS drifted between about 490 and 600 MiB from run to run.
`malloc_trim` hands it back (RSS about 400 MiB), at most every 30 s since a trim takes time.
Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
from collections.abc import Callable

#: Net allocations between young-generation collections (CPython's default is 700).
GC_THRESHOLD = 50_000


def relax_garbage_collection() -> None:
    """Call once set up: freeze what exists now and collect young objects less often."""
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 20, 20)


def _load_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _load_malloc_trim()


class FreeMemoryReleaser:
    """Calls malloc_trim at most once per `period` seconds (a trim of a large heap takes ms)."""

    def __init__(self, period: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._period = period
        self._clock = clock
        self._last: float | None = None

    def __call__(self) -> None:
        now = self._clock()
        if _MALLOC_TRIM is None or (self._last is not None and now - self._last < self._period):
            return
        self._last = now
        _MALLOC_TRIM(0)
