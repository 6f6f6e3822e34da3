"""The alarm book: open alarms, recent closed ones, event counts, and who hears of changes.

Thread-safe: the matrix cycle's thread records each evaluation's events (`record`); HTTP
handlers, metrics and persistence read copies. Listeners are called on the recording thread,
after the book has changed and outside its lock, with that evaluation's events; one that raises
is logged and the others still hear.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from service.alarms.records import Alarm, AlarmEvent, AlarmKind

#: Closed alarms kept: those ended in the last week, at most this many.
CLOSED_KEPT_SECONDS = 7 * 86400
CLOSED_KEPT_MAX = 10_000
Listener = Callable[[AlarmEvent], None]
EventKey = tuple[AlarmKind, str]


class AlarmBook:
    """Open alarms by (kind, subject), the recent closed ones and counts of events."""

    def __init__(
        self,
        log: logging.Logger | None = None,
        closed_kept_seconds: float = CLOSED_KEPT_SECONDS,
        closed_kept_max: int = CLOSED_KEPT_MAX,
    ) -> None:
        self._lock = threading.Lock()
        self._open: dict[tuple[AlarmKind, str], Alarm] = {}
        self._closed: deque[Alarm] = deque(maxlen=closed_kept_max)
        self._closed_kept_seconds = closed_kept_seconds
        self._events_total: dict[EventKey, int] = {}
        self._listeners: list[Listener] = []
        self._log = log or logging.getLogger("nettel.alarms")

    # -- reading -------------------------------------------------------------------------------

    def open_alarms(self) -> list[Alarm]:
        """Every open alarm, oldest opened first."""
        with self._lock:
            return sorted(self._open.values(), key=_opening_order)

    def closed_alarms(self) -> list[Alarm]:
        """The recent closed alarms (the last week's, bounded), most recently ended last."""
        with self._lock:
            return list(self._closed)

    def find_open(self, kind: AlarmKind, subject: str) -> Alarm | None:
        with self._lock:
            return self._open.get((kind, subject))

    def query(
        self,
        site: str | None = None,
        kind: AlarmKind | None = None,
        since: float | None = None,
    ) -> list[Alarm]:
        """Open and recent closed alarms about `site` (one of its sites), of `kind`, in effect
        at or after `since` (open, or started or ended then); open ones first, each part in
        `open_alarms` / `closed_alarms` order."""
        alarms = self.open_alarms() + self.closed_alarms()
        return [alarm for alarm in alarms if _matches(alarm, site, kind, since)]

    @property
    def events_total(self) -> Mapping[EventKey, int]:
        """(kind, "open" or "close") -> events since start (a copy)."""
        with self._lock:
            return dict(self._events_total)

    def open_by_kind(self) -> dict[AlarmKind, int]:
        """Open alarms of every kind (0 for a kind with none)."""
        counts = dict.fromkeys(AlarmKind, 0)
        with self._lock:
            for kind, _ in self._open:
                counts[kind] += 1
        return counts

    # -- listening -----------------------------------------------------------------------------

    def add_listener(self, callback: Listener) -> Callable[[], None]:
        """Hear every event from now on; returns the function that stops it."""
        with self._lock:
            self._listeners.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._listeners:
                    self._listeners.remove(callback)

        return unsubscribe

    # -- changing ------------------------------------------------------------------------------

    def record(self, events: Sequence[AlarmEvent]) -> None:
        """Apply one evaluation's events in order, then tell the listeners.

        An "open" adds its alarm (ValueError if an alarm of its kind and subject is open); a
        "close" replaces the open alarm of its id with the closed one given."""
        if not events:
            return
        with self._lock:
            for event in events:
                self._apply(event)
            self._forget_old(events[-1].at)
            listeners = list(self._listeners)
        for event in events:
            for listener in listeners:
                try:
                    listener(event)
                except Exception:
                    self._log.exception(
                        "alarm listener failed",
                        extra={"listener": repr(listener), "alarm": event.alarm.id},
                    )

    def restore(
        self,
        open_alarms: Iterable[Alarm],
        closed: Iterable[Alarm],
        events_total: Mapping[EventKey, int],
    ) -> None:
        """Take a saved book's content in place of this one's (at start, before any event)."""
        with self._lock:
            self._open = {(alarm.kind, alarm.subject): alarm for alarm in open_alarms}
            self._closed.clear()
            self._closed.extend(sorted(closed, key=_closing_order))
            self._events_total = dict(events_total)

    def _apply(self, event: AlarmEvent) -> None:
        alarm = event.alarm
        key = (alarm.kind, alarm.subject)
        if event.action == "open":
            if key in self._open:
                raise ValueError(f"{alarm.kind.value} about {alarm.subject} is open already")
            self._open[key] = alarm
        else:
            held = self._open.get(key)
            if held is None or held.id != alarm.id:
                raise ValueError(f"alarm {alarm.id} ({alarm.kind.value}) is not open")
            del self._open[key]
            self._closed.append(alarm)
        counted = (alarm.kind, event.action)
        self._events_total[counted] = self._events_total.get(counted, 0) + 1

    def _forget_old(self, now: float) -> None:
        cutoff = now - self._closed_kept_seconds
        while self._closed and (self._closed[0].ended_at or 0.0) < cutoff:
            self._closed.popleft()


def _opening_order(alarm: Alarm) -> tuple[float, str]:
    return alarm.opened_at, alarm.id


def _closing_order(alarm: Alarm) -> tuple[float, str]:
    return alarm.ended_at or 0.0, alarm.id


def _matches(alarm: Alarm, site: str | None, kind: AlarmKind | None, since: float | None) -> bool:
    if site is not None and site not in alarm.sites:
        return False
    if kind is not None and alarm.kind != kind:
        return False
    if since is None or alarm.ended_at is None:
        return True
    return alarm.started_at >= since or alarm.ended_at >= since
