"""Token buckets per client address: how often each client may send, and when it may again."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable


class ClientRateLimiter:
    """`rate` requests per second per client, in bursts of up to `burst`.

    Memory is bounded: beyond `max_clients` addresses the one seen least recently is forgotten
    (it starts again with a full bucket). Not thread-safe: the HTTP event loop is its one user.

    >>> clock = iter([0.0, 0.0, 0.0, 0.5]).__next__
    >>> limiter = ClientRateLimiter(rate=2.0, burst=2, clock=clock)
    >>> [limiter.admit("192.0.2.1") for _ in range(3)]
    [0.0, 0.0, 0.5]
    >>> limiter.admit("192.0.2.1")  # half a second later: one token back
    0.0
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        max_clients: int = 65_536,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be positive and burst at least 1")
        self._rate = rate
        self._burst = float(burst)
        self._max_clients = max_clients
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, when

    def admit(self, client: str) -> float:
        """0.0 when `client` may send now (a token is taken), else the seconds until it may."""
        now = self._clock()
        tokens, then = self._buckets.pop(client, (self._burst, now))
        tokens = min(self._burst, tokens + (now - then) * self._rate)
        wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self._rate
        self._buckets[client] = (tokens - 1.0 if wait == 0.0 else tokens, now)
        if len(self._buckets) > self._max_clients:
            self._buckets.popitem(last=False)
        return wait
