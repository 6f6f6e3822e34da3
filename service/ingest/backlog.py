"""When ingest counts as behind: a back-fill or burst is being worked off.

Frames can wait in the frame batcher (received, not yet applied); at the broker's side of the
connection, unread in the socket, when the receiver thread itself is the bottleneck; or at the
broker, when the receiver keeps up with how fast the broker hands out a stored backlog, which
shows in how long messages took from the broker to nettel. The matrix cycle holds
data-triggered recomputes back while ingest is behind (`BacklogWatch`): a matrix of
half-applied data is stale before it is served, and the CPU is better spent on the backlog.
"""

from __future__ import annotations

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
