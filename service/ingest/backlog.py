"""When ingest counts as behind: a back-fill or burst is being worked off.

Frames can wait in the frame batcher (received, not yet applied); at the broker's side of the
connection, unread in the socket, when the receiver thread itself is the bottleneck; or at the
broker, when the receiver keeps up with how fast the broker hands out a stored backlog, which
shows in how long messages took from the broker to nettel. The matrix cycle holds
data-triggered recomputes back while ingest is behind (`BacklogWatch`): a matrix of
half-applied data is stale before it is served, and the CPU is better spent on the backlog.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: Received frames waiting beyond this (four of the frame batcher's batches) mean a backlog.
BACKLOG_FRAMES = 2048
#: Unread bytes in the broker's socket beyond this mean a backlog. A receiver keeping up with
#: 5,000 msg/s left at most ~75 KB there between reads; draining a back-fill, up to 1.5 MB.
BACKLOG_UNREAD_BYTES = 256 * 1024
#: Messages arriving this many seconds after the broker stamped them mean a backlog at the
#: broker. Live messages take milliseconds and the freshness budget is 2 s; the broker's and
#: nettel's clocks must agree to within this (NTP), or a broker clock this far behind would
#: hold data-triggered recomputes back for good (`nettel_ingest_arrival_lag_seconds` shows it).
BACKLOG_LAG_SECONDS = 5.0
#: An arrival lag beyond this is no lag but a `timestamp` header in another sense or unit.
PLAUSIBLE_LAG_SECONDS = 86_400.0
#: The arrival lag is the least among the messages of the last one or two such periods.
LAG_WINDOW_SECONDS = 1.0
#: A backlog counts once seen at every poll for this long. While a recompute runs, ingest waits
#: for the GIL and a burst builds up; it clears within a poll or two and is no back-fill.
BEHIND_PERSIST_SECONDS = 0.3
#: Seconds without a backlog before ingest no longer counts as behind: the signal flickers while
#: a back-fill streams in.
BEHIND_QUIET_SECONDS = 1.0


def ingest_is_behind(
    queued_frames: int, unread_bytes: int, arrival_lag_seconds: float | None = None
) -> bool:
    """Whether any of the three places holds a backlog now (see the constants)."""
    lagging = arrival_lag_seconds is not None and arrival_lag_seconds > BACKLOG_LAG_SECONDS
    return queued_frames > BACKLOG_FRAMES or unread_bytes > BACKLOG_UNREAD_BYTES or lagging


class BacklogWatch:
    """Turns the backlog seen at each poll into whether ingest is behind (see the constants).

    Called without arguments, it polls `backlog` (e.g. `ingest_is_behind` over the live
    signals) at the monotonic `clock`'s time: the matrix cycle's `behind` callable.
    """

    def __init__(
        self,
        backlog: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._backlog = backlog
        self._clock = clock
        self._backlog_since: float | None = None
        self._last_behind = float("-inf")

    def __call__(self) -> bool:
        return self.behind(self._clock(), self._backlog())

    def behind(self, now: float, backlog: bool) -> bool:
        """`backlog`: whether a backlog is seen now (`ingest_is_behind`); `now` is monotonic."""
        if not backlog:
            self._backlog_since = None
        elif self._backlog_since is None:
            self._backlog_since = now
        if self._backlog_since is not None and now - self._backlog_since >= BEHIND_PERSIST_SECONDS:
            self._last_behind = now
        return now - self._last_behind < BEHIND_QUIET_SECONDS


class ArrivalLag:
    """How long messages took from the broker to here: the least arrival time minus `timestamp`
    header (ms since the epoch) among the messages of the last one to two LAG_WINDOW_SECONDS.

    ActiveMQ stamps a message when it takes it in, unless its producer set the header: one
    producer stamping its messages an hour back would make the last message's lag an hour,
    and hold every data-triggered recompute back. The least lag is low while any producer's
    messages arrive fresh; it is high only when all are late, as during a back-fill. Stamps
    over a day off (another unit, or no clock at all) are left out.

    >>> lag = ArrivalLag()
    >>> lag.observe("1000000", 1003.5); lag.observe("1000", 1003.6)  # 3.5 s; a forged stamp
    >>> round(lag.seconds(), 3)
    3.5
    """

    def __init__(self, window: float = LAG_WINDOW_SECONDS) -> None:
        self._window = window
        self._started = -math.inf  # when the current period began
        self._current = math.inf  # least lag of the current and the previous period
        self._previous = math.inf

    def observe(self, stamp: str | None, arrived: float) -> None:
        """One message's `timestamp` header (None when it has none) and arrival time."""
        if not stamp or not stamp.isdigit():
            return
        lag = arrived - int(stamp) / 1000
        if abs(lag) >= PLAUSIBLE_LAG_SECONDS:
            return
        if arrived - self._started >= self._window:
            recent = arrived - self._started < 2 * self._window
            self._previous = self._current if recent else math.inf
            self._current, self._started = math.inf, arrived
        self._current = min(self._current, lag)

    def seconds(self) -> float | None:
        """The least lag of the last periods with stamped messages (None before any)."""
        least = min(self._current, self._previous)
        return None if least == math.inf else least
