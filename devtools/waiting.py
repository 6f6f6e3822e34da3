"""Waiting on a condition with a deadline, for tests and benchmarks: never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T], timeout: float = 30.0, interval: float = 0.1, what: str = "condition"
) -> T:
    """Poll `probe` until it returns something truthy and return that; after `timeout` s raise
    AssertionError naming `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")
        time.sleep(interval)
