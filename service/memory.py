"""Return freed heap memory to the operating system after each matrix cycle.

A cycle frees hundreds of MB of short-lived Python objects at 100,000 links; glibc keeps such
memory in its heap, so the process's RSS drifted between about 490 and 600 MiB from run to run.
`malloc_trim` hands it back (RSS about 400 MiB). Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


def _load_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _load_malloc_trim()


def release_free_memory() -> None:
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
