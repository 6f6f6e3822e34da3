"""`GET /alarms/stream`'s hub: the alarm book's open and close events as server-sent events.

On connect a client gets the alarms open now (event `alarms`, `{"open": [alarm, ...]}`), then
an event `open` or `close` for each alarm opened or closed since, with the alarm as its data
(the `/alarms` record, `service.publish.alarm_view`: a closed one carries its `ended_at`).
Event ids count the events of this process; the `alarms` event carries the id of the last
event it surely includes, and the events after it may repeat an alarm it shows (a client keys
alarms by `id`). Nothing is replayed: a client that reconnects, with or without
`Last-Event-ID`, gets the open alarms again.

Each event is encoded once, in the thread that opens or closes the alarm, and handed to every
subscriber as the same bytes. The streams count against the `--sse-max-streams` of
/costmatrix/stream (one `StreamLimit`); a subscriber that falls `BACKLOG_EVENTS` events behind,
or whose write waits the limit's `send_timeout`, is dropped (`slow_reader`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable

import orjson

from service.alarms.book import AlarmBook
from service.alarms.records import AlarmEvent
from service.matrix.snapshot import CostMatrix
from service.publish.alarm_view import alarm_record
from service.publish.http_guard import HttpRefusal
from service.publish.stream import KEEPALIVE, StreamLimit, sse_event

#: Events kept for subscribers still writing an earlier one; one further behind is dropped.
BACKLOG_EVENTS = 64


class AlarmStream:
    """An alarm book listener that wakes every /alarms/stream client on each event."""

    def __init__(
        self,
        book: AlarmBook,
        limit: StreamLimit,
        latest: Callable[[], CostMatrix | None],
        keepalive: float = 15.0,
    ) -> None:
        self._book = book
        self._latest = latest
        #: The --sse-max-streams it shares with /costmatrix/stream.
        self.limit = limit
        self._keepalive = keepalive
        self._wakeups = limit.hub()
        self._lock = threading.Lock()
        self._sequence = 0
        #: (sequence number, encoded event) of the last BACKLOG_EVENTS events, oldest first.
        self._events: deque[tuple[int, bytes]] = deque(maxlen=BACKLOG_EVENTS)

    def open_streams(self) -> int:
        return self._wakeups.count

    def on_event(self, event: AlarmEvent) -> None:
        """Alarm book listener (the thread that opened or closed the alarm): encode the event
        once, then wake the clients' event loops."""
        data = orjson.dumps(alarm_record(event.alarm, self._latest()))
        with self._lock:
            self._sequence += 1
            self._events.append(
                (self._sequence, sse_event(event.action, str(self._sequence), data))
            )
        self._wakeups.wake_all()

    async def events(self, client: str = "unknown") -> AsyncIterator[bytes]:
        """The byte stream of one client."""
        yield b"retry: 3000\n\n"
        with self._wakeups.registered() as wake:
            with self._lock:
                shown = self._sequence
            # read after `shown` (the book changes its alarms before it tells its listeners):
            # an event after `shown` may already be in `current`, none before it is missing
            matrix = self._latest()
            current = [alarm_record(alarm, matrix) for alarm in self._book.open_alarms()]
            yield sse_event("alarms", str(shown), orjson.dumps({"open": current}))
            while not self._wakeups.closed:
                wake.clear()
                with self._lock:
                    oldest = self._events[0][0] if self._events else shown + 1
                    pending = [event for event in self._events if event[0] > shown]
                if oldest > shown + 1:
                    detail = f"/alarms/stream subscriber over {BACKLOG_EVENTS} events behind"
                    self.limit.refuse(HttpRefusal.SLOW_READER, client, detail)
                    return
                for shown, chunk in pending:  # noqa: B007 (shown: the last event sent)
                    yield chunk
                try:
                    await asyncio.wait_for(wake.wait(), self._keepalive)
                except TimeoutError:
                    yield KEEPALIVE
