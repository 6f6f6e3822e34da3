"""Where the alarm book's events go: /alarms/stream's subscribers and, with broker telemetry,
the alarm topic. One of the publishers (`Publishers.alarms`): its start makes both listen to
the book, its stop ends that (the streams end with the other SSE streams, `StreamLimit.close`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from service.alarms.book import AlarmBook
from service.matrix.snapshot import CostMatrix
from service.publish.alarm_events import AlarmEventPublisher
from service.publish.alarm_stream import AlarmStream
from service.publish.stream import StreamLimit
from service.publish.telemetry import TelemetryPublisher


@dataclass
class AlarmFeed:
    """The alarm book and its listeners among the publishers."""

    name = "alarm feed"

    book: AlarmBook
    stream: AlarmStream
    #: The matrix served now (the alarms' site pairs and sites).
    latest: Callable[[], CostMatrix | None]
    #: None without broker telemetry.
    broker: AlarmEventPublisher | None = None
    _unsubscribe: list[Callable[[], None]] = field(default_factory=list)

    def start(self) -> None:
        listeners = [self.stream.on_event]
        if self.broker is not None:
            listeners.append(self.broker.on_event)
        self._unsubscribe = [self.book.add_listener(listener) for listener in listeners]

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []


def build_alarm_feed(
    book: AlarmBook,
    limit: StreamLimit,
    latest: Callable[[], CostMatrix | None],
    telemetry: TelemetryPublisher | None,
    topic: str,
) -> AlarmFeed:
    """The feed of `book`: its stream under `limit` (the matrix stream's), its broker events on
    `topic` over `telemetry`'s connection (none without telemetry); `latest`: the matrix
    served now (the alarms' site pairs)."""
    broker = None if telemetry is None else AlarmEventPublisher(telemetry, topic, latest)
    return AlarmFeed(book, AlarmStream(book, limit, latest), latest, broker)
