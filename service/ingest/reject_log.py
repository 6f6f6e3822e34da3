"""Logs each reject reason at most once per period, with how many were suppressed meanwhile.

Reasons are any string enum: `RejectReason` for input, `HttpRefusal` for the HTTP front door.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import StrEnum


class RateLimitedRejectLog:
    def __init__(
        self,
        log: logging.Logger,
        period_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._period = period_seconds
        self._clock = clock
        self._last_logged: dict[StrEnum, float] = {}
        self._suppressed: dict[StrEnum, int] = {}

    def record(self, reason: StrEnum, detail: str, topic: str, client: str | None = None) -> bool:
        """Log this rejection unless its reason was logged within the period; True if logged.
        `client`: who sent the input, where known (an HTTP client's address)."""
        now = self._clock()
        last = self._last_logged.get(reason)
        if last is not None and now - last < self._period:
            self._suppressed[reason] = self._suppressed.get(reason, 0) + 1
            return False
        self._last_logged[reason] = now
        suppressed = self._suppressed.pop(reason, 0)
        extra = {
            "reason": reason.value,
            "detail": detail,
            "topic": topic,
            "suppressed_since_last": suppressed,
        }
        if client is not None:
            extra["client"] = client
        self._log.warning("rejected input", extra=extra)
        return True
