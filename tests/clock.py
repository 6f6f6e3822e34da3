"""The one test clock: a callable returning a time that only moves when a test moves it."""

from __future__ import annotations


class TestClock:
    """Stands in for `time.time` or `time.monotonic`: `clock()` is `clock.now`."""

    __test__ = False  # not a test class, despite its name

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by `seconds`; returns the new time."""
        self.now += seconds
        return self.now
