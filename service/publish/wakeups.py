"""Waking the event-loop tasks that serve push streams, from the matrix cycle's thread.

Each stream task registers an `asyncio.Event` on its own loop; `wake_all` sets every one through
its loop (thread-safe), and `close` marks the hub closed and wakes them one last time so their
streams can end (at shutdown, from any thread or a signal handler).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Wakeups:
    """The wake-up events of the open streams of one publisher."""

    def __init__(self) -> None:
        self._events: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._lock = threading.RLock()  # re-entrant: `close` may run in a signal handler
        self.closed = False

    @contextmanager
    def registered(self) -> Iterator[asyncio.Event]:
        """An event woken by `wake_all` and `close` while the block runs (on the running loop)."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._events.add(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                self._events.discard(entry)

    @property
    def count(self) -> int:
        """How many streams are registered."""
        with self._lock:
            return len(self._events)

    def wake_all(self) -> None:
        with self._lock:
            entries = list(self._events)
        for loop, event in entries:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that stream's event loop is already closed
                pass

    def close(self) -> None:
        self.closed = True
        self.wake_all()
