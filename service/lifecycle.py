"""What every running part of the service shares: one start/stop protocol and one background loop.

The runtime holds its parts in one ordered list, starts them in order and stops them in reverse
(`service.runtime`); each part that works in the background does so on a `BackgroundLoop`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class Component(Protocol):
    """A running part: `start()` once, then `stop()` once (also when it never started)."""

    @property
    def name(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Hooks:
    """A part that is a pair of calls on other objects, e.g. releasing a lock at stop."""

    name: str
    on_start: Callable[[], object] = _nothing
    on_stop: Callable[[], object] = _nothing

    def start(self) -> None:
        self.on_start()

    def stop(self) -> None:
        self.on_stop()


class BackgroundLoop:
    """A named daemon thread that calls `step` until stopped, waiting `interval` seconds between
    steps (None: until woken); `wake()` cuts a wait short, `pause_next` sets the next one.

    `wait_first`: wait before the first step too. Exceptions from `step` end the thread: each
    step catches and logs what it survives."""

    def __init__(
        self,
        name: str,
        step: Callable[[], object],
        interval: float | None = 0.0,
        *,
        wait_first: bool = False,
    ) -> None:
        self.name = name
        self._step = step
        self._interval = interval
        self._next_pause = interval
        self._wait_first = wait_first
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @classmethod
    def once(cls, name: str, call: Callable[[], object]) -> BackgroundLoop:
        """`call` once on its own daemon thread (it may loop itself, ending on `stopping`)."""

        def step() -> None:
            call()
            loop.finish()

        loop = cls(name, step)
        return loop

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Take the next step now (never blocks: safe from a signal handler)."""
        self._wake.set()

    def wait(self, seconds: float | None) -> bool:
        """Sleep up to `seconds` in a step of a loop of its own; True once stopping."""
        return self._stopping.wait(seconds)

    def pause_next(self, seconds: float | None) -> None:
        """From a step: wait `seconds` (None: until woken) before the next step, not `interval`."""
        self._next_pause = seconds

    def finish(self) -> None:
        """End after the current step (from the step itself, or before `join`)."""
        self._stopping.set()
        self._wake.set()

    def join(self, timeout: float | None = 5.0) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def stop(self, timeout: float | None = 5.0) -> None:
        """End the loop and wait at most `timeout` seconds (None: however long) for its step."""
        self.finish()
        self.join(timeout)

    def _run(self) -> None:
        if self._wait_first and self._pause(self._interval):
            return
        while not self._stopping.is_set():
            self._next_pause = self._interval
            self._step()
            if self._pause(self._next_pause):
                return

    def _pause(self, seconds: float | None) -> bool:
        """Wait until woken, stopped or `seconds` have passed; True when stopping."""
        self._wake.wait(seconds)
        self._wake.clear()
        return self._stopping.is_set()
