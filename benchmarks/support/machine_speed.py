"""A fixed reference workload, timed at the start and end of a run, so that absolute figures
from different machines (or from one shared machine that slowed down) can be told apart."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

REPEATS = 3


def reference_seconds(repeats: int = REPEATS) -> dict[str, float]:
    """Median seconds of the interpreter part and of the numpy part (lower is faster)."""
    return {
        "python": statistics.median(_timed(_interpreter_work) for _ in range(repeats)),
        "numpy": statistics.median(_timed(_numpy_work) for _ in range(repeats)),
    }


def _interpreter_work() -> None:
    records = [{"source": f"10.0.{n % 250}.{n % 7}", "cost": n / 7} for n in range(200_000)]
    sum(len(r["source"]) + r["cost"] for r in sorted(records, key=lambda r: r["cost"] % 1))


def _numpy_work() -> None:
    values = np.random.default_rng(7).random((2_000, 1_000))
    np.sort(values, axis=1)
    np.nanmedian(values, axis=1)
    values @ values[:1_000].T


def _timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started
