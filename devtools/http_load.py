"""Closed-loop HTTP load for tests and benchmarks: threads that GET one URL back to back and
count every answer that is not a 200 (or no answer at all) as a failure."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx


@dataclass
class LoadResult:
    requests: int = 0
    #: (monotonic time, what went wrong) of each failed request: a status or an error.
    failures: list[tuple[float, str]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    #: Monotonic time each request (failed or not) completed.
    completed: list[float] = field(default_factory=list)


class HttpLoad:
    """`threads` clients (keep-alive connections) getting `url` until `stop`."""

    def __init__(self, url: str, threads: int = 4, timeout: float = 10.0) -> None:
        self._url = url
        self._timeout = timeout
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._result = LoadResult()
        self._threads = [
            threading.Thread(target=self._run, name=f"http-load-{n}", daemon=True)
            for n in range(threads)
        ]

    def start(self) -> HttpLoad:
        for thread in self._threads:
            thread.start()
        return self

    def completed_since(self, since: float) -> int:
        """Requests (failed or not) that ended after the monotonic time `since`."""
        with self._lock:
            return sum(finished > since for finished in self._result.completed)

    def stop(self) -> LoadResult:
        self._stop.set()
        for thread in self._threads:
            thread.join(self._timeout + 5)
        return self._result

    def _run(self) -> None:
        with httpx.Client(timeout=self._timeout) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    status = client.get(self._url).status_code
                    failure = None if status == 200 else f"HTTP {status}"
                except httpx.HTTPError as error:
                    failure = f"{type(error).__name__}: {error}"
                finished = time.monotonic()
                with self._lock:
                    self._result.requests += 1
                    self._result.latencies.append(finished - started)
                    self._result.completed.append(finished)
                    if failure is not None:
                        self._result.failures.append((finished, failure))
