"""Publishes changed links to the broker in netTel's layout (`/topic/telemetry.perfsonar`).

After every recompute, each link whose cost, utilisation, empirical score or congested flag
changed (every link with data after the first recompute) becomes one message like
tests/data/telemetry-output-nettel.json: the input's link `meta` with `tool_name: netTel`, and one
summary point `[last_measurement, {"ml": "<utilisation>", "empirical": "<score>", ...}]` with
numbers as strings as netTel wrote them (null when unknown) plus nettel's `cost` (string),
`congested` (boolean) and `model_version` (string, null without a model).

Links are published at most once per `min_interval` (the service's cycle `interval`), diffed
against the last published matrix: recomputes triggered by fresh data come every second or two
while messages stream in, and netTel itself published once per link per minute; sending every
link on each of them would double the broker's traffic for no consumer's benefit.

The matrix observer only diffs and queues; a background thread serialises and sends over its
own `broker.link.BrokerLink` (which connects, watches heart-beats and reconnects with capped
backoff). A batch leaves the queue once sent; one whose sending fails is sent again, whole, once
the link has reconnected. The queue holds `max_batches` cycles; when the broker is slower than
that, the oldest batch is dropped with a log line.

With `publishes` (an --ha-group replica's election) links are published only while it says
so: a standby forgets what it published, so the first matrix after taking over goes out whole
(each link's current minute, which the previous publisher may have sent too), and batches
queued before a step-down are dropped.

Other publishers send over the same connection and queue (`send_messages`: alarm events, built
by `service.publish.alarm_events`), under the same `publishes`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from service.broker.connection import BrokerAccess, BrokerConnection, BrokerError
from service.broker.link import BrokerLink
from service.lifecycle import BackgroundLoop
from service.matrix.link_record import LinkKey, LinkRecord, link_key
from service.matrix.snapshot import CostMatrix

Message = tuple[dict[str, str], bytes]
#: A message built elsewhere: its destination, headers and JSON body.
Outgoing = tuple[str, dict[str, str], bytes]
EVENT_TYPE = "telemetry.perfsonar"
WATCHED_FIELDS = ("cost", "utilisation", "empirical", "congested")


@dataclass(frozen=True)
class Batch:
    """The links of one recompute that changed, or messages built elsewhere, to be published."""

    links: list[LinkRecord]
    model_version: str | None
    messages: tuple[Outgoing, ...] = ()


def changed_links(previous: CostMatrix | None, current: CostMatrix) -> list[LinkRecord]:
    """Links with data whose watched fields differ from `previous` (all of them without one).

    Rows keep their link from one snapshot to the next while links are only appended, and an
    unchanged link keeps its very record object, so most links are settled by an identity test;
    a row that holds another link than before (rows moved up when links were retired) is
    compared with that link's own previous record, found by its source and destination.
    """
    before = () if previous is None else previous.links
    by_key: dict[LinkKey, LinkRecord] | None = None
    changed = []
    for row, link in enumerate(current.links):
        if link["last_measurement"] is None:
            continue
        old = before[row] if row < len(before) else None
        if old is link:
            continue
        if old is not None and link_key(old) != link_key(link):
            by_key = by_key or {link_key(b): b for b in before}
            old = by_key.get(link_key(link))
        if old is None or _differs(link, old):
            changed.append(link)
    return changed


def _differs(link: LinkRecord, before: LinkRecord) -> bool:
    return any(link[name] != before[name] for name in WATCHED_FIELDS)


def build_telemetry_message(link: LinkRecord, topic: str, model_version: str | None) -> Message:
    """STOMP headers and JSON body of one link's netTel-layout message."""
    ts = link["last_measurement"]
    headers = {
        "destination": topic,
        "event-type": EVENT_TYPE,
        "summaries": "1",
        "input-source": link["source_host"],
        "input-destination": link["destination_host"],
        "timestamp": str(ts),
        "gmt-timestamp": str(ts),
    }
    values = {
        "ml": _text(link["utilisation"]),
        "empirical": _text(link["empirical"]),
        "cost": _text(link["cost"]),
        "congested": link["congested"],
        "model_version": model_version,
    }
    summary = {
        "event_type": EVENT_TYPE,
        "summary_window": "60",
        "summary_type": "statistics",
        "summary_data": [[ts, values]],
    }
    return headers, orjson.dumps({"meta": _meta(link), "summaries": [summary]})


def _meta(link: LinkRecord) -> dict[str, Any]:
    return {
        "source": link["source"],
        "destination": link["destination"],
        "input_source": link["source_host"],
        "input_destination": link["destination_host"],
        "subject_type": "point-to-point",
        "ip_transport_protocol": "udp",
        "time_duration": "60",
        "tool_name": "netTel",
    }


def _text(value: float | None) -> str | None:
    return None if value is None else str(value)


class _BatchQueue:
    """Bounded FIFO of batches; a full queue drops its oldest batch."""

    def __init__(self, capacity: int, log: logging.Logger) -> None:
        self._batches: deque[Batch] = deque()
        self._capacity = capacity
        self._log = log
        self._ready = threading.Condition()

    def put(self, batch: Batch) -> None:
        with self._ready:
            if len(self._batches) >= self._capacity:
                dropped = self._batches.popleft()
                self._log.warning(
                    "telemetry publisher behind the broker; dropped the oldest batch",
                    extra={"links": len(dropped.links)},
                )
            self._batches.append(batch)
            self._ready.notify()

    def peek(self, timeout: float) -> Batch | None:
        with self._ready:
            self._ready.wait_for(lambda: self._batches, timeout)
            return self._batches[0] if self._batches else None

    def done(self, batch: Batch) -> None:
        """Remove `batch` once sent (unless it was dropped meanwhile)."""
        with self._ready:
            if self._batches and self._batches[0] is batch:
                self._batches.popleft()


class TelemetryPublisher:
    """Matrix observer that publishes changed links to `topic` from its own thread."""

    name = "telemetry-publisher"

    def __init__(
        self,
        access: BrokerAccess,
        topic: str,
        *,
        max_batches: int = 8,
        max_backoff_seconds: float = 30.0,
        min_interval: float = 0.0,
        publishes: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
    ) -> None:
        self._min_interval = min_interval
        self._publishes = publishes
        self._clock = clock
        self._published: CostMatrix | None = None
        self._published_at = -float("inf")
        self._topic = topic
        self._log = log or logging.getLogger("nettel.telemetry")
        self._queue = _BatchQueue(max_batches, self._log)
        self._link = BrokerLink(
            access,
            max_backoff_seconds=max_backoff_seconds,
            label="telemetry publisher",
            log=self._log,
            log_extra={"topic": topic},
        )
        self._loop = BackgroundLoop(self.name, self._send_next)

    def observe(self, previous: CostMatrix | None, current: CostMatrix) -> None:
        """Matrix observer (cycle thread): queue the links changed since the last publication."""
        if not self._publishes():  # standby: a takeover starts from the whole matrix
            self._published, self._published_at = None, -float("inf")
            return
        now = self._clock()
        if now - self._published_at < self._min_interval:
            return
        links = changed_links(self._published, current)
        self._published, self._published_at = current, now
        if links:
            version = current.model.version if current.model else None
            self._queue.put(Batch(links, version))

    def send_messages(self, messages: tuple[Outgoing, ...]) -> None:
        """Queue messages built elsewhere (any thread), sent while this instance publishes."""
        if self._publishes():
            self._queue.put(Batch([], None, messages))

    def start(self) -> None:
        self._link.start()
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._loop.stop(timeout)
        self._link.stop(timeout)

    def _send_next(self) -> None:
        """The publisher thread's step: send the oldest batch once connected (waits <= 1 s)."""
        batch = self._queue.peek(timeout=0.5)
        if batch is None:
            return
        if not self._publishes():  # stepped down since it was queued
            self._queue.done(batch)
            return
        connection = self._link.wait_connected(timeout=0.5)
        if connection is not None and self._send(connection, batch):
            self._queue.done(batch)

    def _send(self, connection: BrokerConnection, batch: Batch) -> bool:
        try:
            for link in batch.links:
                headers, body = build_telemetry_message(link, self._topic, batch.model_version)
                connection.send(self._topic, body, "application/json", headers)
            for destination, headers, body in batch.messages:
                connection.send(destination, body, "application/json", headers)
        except (BrokerError, OSError) as error:
            self._log.warning("telemetry publish failed", extra={"error": repr(error)})
            self._link.report_lost(connection)
            return False
        return True
