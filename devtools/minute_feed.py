"""A feed of one loss datapoint per link and minute over STOMP, for the high-availability test
and benchmark (`tests/integration/test_ha_replicas.py`, `benchmarks/measurements/ha_failover`).

Every `period` seconds each link gets the datapoint of its next minute, the links spread evenly
over the period as perfSONAR hosts send them; the loss alternates 0 and 0.5 from one minute to
the next, so every new minute changes each link's cost and is published as telemetry::

    feed = MinuteFeed(broker.brokers, ["10.61.0.1", "10.61.0.2"], loss_message, period=3.0)
    feed.start()
    ...
    feed.stop()
    feed.minutes    # the minutes every link was given, in order
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from devtools.stomp_client import StompClient

#: (source address, minute, loss) -> what to send: destination, body (a mapping as JSON), headers.
LossMessage = Callable[[str, int, float], tuple[str, Mapping[str, Any] | bytes, Mapping[str, str]]]


class MinuteFeed:
    """A thread publishing one minute of loss data per link every `period` seconds, minutes
    counted from `first_minute` (epoch s; default the current minute)."""

    def __init__(
        self,
        brokers: str,
        sources: Sequence[str],
        message: LossMessage,
        *,
        period: float = 60.0,
        first_minute: int | None = None,
    ) -> None:
        self._publisher = StompClient(brokers)
        self._sources = list(sources)
        self._message = message
        self._period = period
        self._first_minute = (
            first_minute if first_minute is not None else int(time.time()) // 60 * 60
        )
        self.minutes: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="minute-feed", daemon=True)

    def start(self) -> MinuteFeed:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._publisher.close()

    def _run(self) -> None:
        started = time.monotonic()
        gap = self._period / len(self._sources)
        for number in itertools.count():
            minute = self._first_minute + 60 * number
            loss = 0.5 * (number % 2)
            for position, source in enumerate(self._sources):
                due = started + number * self._period + position * gap
                if self._stop.wait(max(0.0, due - time.monotonic())):
                    return
                self._publisher.send(*self._message(source, minute, loss))
            self.minutes.append(minute)
