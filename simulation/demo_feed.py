"""Demo adapter: publish a simulated perfSONAR mesh to ActiveMQ over STOMP, like the collectors do.

Every directed link gets one histogram-owdelay and one packet-loss-rate message per minute, each
with that minute's single datapoint, and at perfSONAR's cadence the results of its throughput
tests (throughput and packet-retransmits, every 4 hours) and traceroutes (packet-trace, every
10 minutes), each in the minute it started (`simulation.throughput_traces`). First the
throughput tests of the last three weeks (the history the service's bandwidth alarms judge) and
the last `backfill_minutes` whole minutes are sent at once, then each new minute a few seconds
after it ends. The same seed gives the same messages. Faults (`simulation.faults`) change what
is published from their minute on, counted from the first minute sent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np
import orjson
import stomp
from stomp.exception import ConnectFailedException, StompException

from simulation.bus_format import (
    MAX_DATAPOINTS,
    Message,
    build_delay_message,
    build_loss_message,
    build_retransmits_message,
    build_throughput_message,
    build_trace_message,
)
from simulation.defaults import DEFAULT_SITES
from simulation.faults import NO_FAULTS, FaultedMinute, FaultPlan, apply_faults
from simulation.simulator import (
    Mesh,
    MinuteMeasurements,
    build_mesh,
    simulate_minute,
    simulate_utilisation,
)
from simulation.throughput_traces import (
    MeshRoutes,
    MinuteTests,
    build_routes,
    simulate_tests,
    throughput_history,
    trace_hops,
)

HEARTBEATS_MS = (10_000, 10_000)
CONNECT_TIMEOUT_S = 60.0
CONNECT_RETRY_S = 2.0
#: Seconds after a minute ends before it is published (the collector's polling lag).
PUBLISH_LAG_S = 3.0
#: Longest wait on `stop` before the clock is read again.
POLL_S = 1.0


class _BrokerSession:
    """One STOMP 1.2 connection to the first reachable broker, reopened on demand."""

    def __init__(
        self,
        brokers: list[tuple[str, int]],
        user: str | None,
        password: str | None,
        stop: threading.Event,
        log: logging.Logger,
    ) -> None:
        self._brokers = brokers
        self._credentials = (user, password)
        self._stop = stop
        self._log = log
        self._connection: stomp.Connection | None = None

    def connect(self) -> bool:
        """Connect, retrying for CONNECT_TIMEOUT_S; False if `stop` was set meanwhile."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while not self._stop.is_set():
            try:
                self._connection = self._open()
                return True
            except (StompException, OSError) as error:
                if time.monotonic() >= deadline:
                    raise ConnectFailedException(f"no broker answered: {self._brokers}") from error
                self._log.info("broker not reachable yet brokers=%s error=%r", self._brokers, error)
                self._stop.wait(CONNECT_RETRY_S)
        return False

    def send(self, message: Message) -> None:
        headers, body = message
        if self._connection is None:
            raise ConnectFailedException("not connected")
        self._connection.send(
            destination=headers["destination"],
            body=orjson.dumps(body),
            headers=headers | {"persistent": "true"},
        )

    def close(self) -> None:
        """Disconnect with a receipt, so the broker has every message sent before it."""
        if self._connection is not None and self._connection.is_connected():
            self._connection.disconnect(receipt="nettel-demo-feed-bye")
        self._connection = None

    def _open(self) -> stomp.Connection:
        connection = stomp.Connection(  # vhost "/": RabbitMQ reads the default host header
            self._brokers, heartbeats=HEARTBEATS_MS, reconnect_attempts_max=1, vhost="/"
        )
        user, password = self._credentials
        connection.connect(user, password, wait=True)
        where = connection.transport.current_host_and_port
        self._log.info("connected to broker host_port=%s", where)
        return connection


class _Feed:
    """The simulated mesh as a sequence of minutes of messages, sent through a session."""

    def __init__(
        self,
        mesh: Mesh,
        seed: int,
        faults: FaultPlan,
        session: _BrokerSession,
        clock: Callable[[], float],
        log: logging.Logger,
    ) -> None:
        self._mesh, self._seed, self._session = mesh, seed, session
        self._routes = build_routes(mesh, seed)
        self._faults = faults
        #: The first minute published: the faults' minutes count from it.
        self._first_minute: int | None = None
        self._clock, self._log = clock, log
        self.sent = 0

    def publish(self, minute: int) -> None:
        """Send every link's delay and loss messages of `minute`.

        On a broken connection, reconnect and send the whole minute again (consumers accept
        repeated datapoints).
        """
        messages = self._messages(minute)
        try:
            self._send_all(messages)
        except (StompException, OSError) as error:
            self._log.warning("connection lost minute=%d error=%r; reconnecting", minute, error)
            if self._session.connect():
                self._send_all(messages)

    def _send_all(self, messages: list[Message]) -> None:
        for message in messages:
            self._session.send(message)
            self.sent += 1

    def _messages(self, minute: int) -> list[Message]:
        history: list[Message] = []
        if self._first_minute is None:
            self._first_minute = minute
            for planned in self._faults.faults:
                fault = planned.fault.describe()
                onset = minute + planned.fault.start_minute
                extra = {"fault": fault, "onset_minute": onset}
                self._log.info("fault from epoch minute %d: %s", onset, fault, extra=extra)
            history = history_messages(self._mesh, self._seed, minute, self._clock())
        measured, tests = demo_minute(self._mesh, self._seed, minute)
        elapsed = minute - self._first_minute
        faulted = apply_faults(measured, self._faults, elapsed, tests, self._routes)
        return history + minute_messages(self._mesh, faulted, self._clock(), self._routes)


def demo_minute(mesh: Mesh, seed: int, minute: int) -> tuple[MinuteMeasurements, MinuteTests]:
    """The demo mesh's measurements of `minute` and the throughput tests and traceroutes that
    start in it, before any fault."""
    utilisation = simulate_utilisation(mesh, minute, 1, seed)[:, 0]
    measured = simulate_minute(mesh, utilisation, minute, seed)
    return measured, simulate_tests(mesh, seed, minute, utilisation)


def minute_messages(
    mesh: Mesh, faulted: FaultedMinute, sent_at: float, routes: MeshRoutes | None = None
) -> list[Message]:
    """The bus messages of one minute: per published link a delay message (unless every probe
    was lost: no histogram to report) and a loss message; then (with the mesh's `routes`) the
    minute's throughput tests, their retransmits and its traceroutes."""
    measured, ts = faulted.measurements, faulted.measurements.timestamp
    messages = []
    for link in np.flatnonzero(faulted.published).tolist():
        histogram = measured.histogram(link)
        if histogram:
            messages.append(build_delay_message(mesh, link, {ts: histogram}, sent_at=sent_at))
        loss = {ts: float(measured.loss[link])}
        messages.append(build_loss_message(mesh, link, loss, sent_at=sent_at))
    if faulted.tests is not None and routes is not None:
        messages += result_messages(mesh, faulted.tests, routes, sent_at)
    return messages


def result_messages(
    mesh: Mesh, tests: MinuteTests, routes: MeshRoutes, sent_at: float
) -> list[Message]:
    """A throughput and a retransmits message per throughput test, a trace message per trace."""
    messages = []
    results = zip(
        tests.throughput_links.tolist(),
        tests.throughput_ts.tolist(),
        tests.bps.tolist(),
        tests.retransmits.tolist(),
        strict=True,
    )
    for link, ts, bps, retransmits in results:
        messages.append(build_throughput_message(mesh, link, {ts: round(bps)}, sent_at=sent_at))
        messages.append(build_retransmits_message(mesh, link, {ts: retransmits}, sent_at=sent_at))
    traces = zip(
        tests.trace_links.tolist(),
        tests.trace_ts.tolist(),
        tests.alternative.tolist(),
        tests.answered.tolist(),
        strict=True,
    )
    for link, ts, alternative, answered in traces:
        route = (routes.alternative if alternative else routes.usual)[link]
        hops = trace_hops(route, float(mesh.base_delay_ms[link]), answered)
        messages.append(build_trace_message(mesh, link, {ts: hops}, sent_at=sent_at))
    return messages


def history_messages(mesh: Mesh, seed: int, first_minute: int, sent_at: float) -> list[Message]:
    """The throughput tests of the weeks before `first_minute` (`throughput_history`), up to
    `MAX_DATAPOINTS` per message and link, as a collector's backlog brings them."""
    rates: dict[int, dict[int, int]] = {}
    counts: dict[int, dict[int, int]] = {}
    history = throughput_history(mesh, seed, first_minute)
    results = zip(
        history.links.tolist(),
        history.ts.tolist(),
        history.bps.tolist(),
        history.retransmits.tolist(),
        strict=True,
    )
    for link, ts, bps, retransmits in results:
        rates.setdefault(link, {})[ts] = round(bps)
        counts.setdefault(link, {})[ts] = retransmits
    messages = []
    for link in sorted(rates):
        times = sorted(rates[link])
        for start in range(0, len(times), MAX_DATAPOINTS):
            chunk = times[start : start + MAX_DATAPOINTS]
            rate = {ts: rates[link][ts] for ts in chunk}
            count = {ts: counts[link][ts] for ts in chunk}
            messages.append(build_throughput_message(mesh, link, rate, sent_at=sent_at))
            messages.append(build_retransmits_message(mesh, link, count, sent_at=sent_at))
    return messages


def run_demo_feed(
    brokers: list[tuple[str, int]],
    *,
    seed: int = 0,
    sites: int = DEFAULT_SITES,
    backfill_minutes: int = 40,
    realtime: bool = True,
    faults: FaultPlan = NO_FAULTS,
    user: str | None = None,
    password: str | None = None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.time,
    log: logging.Logger | None = None,
) -> int:
    """Publish the simulated mesh to `brokers` until done or `stop` is set; return messages sent.

    `faults` (planned on `build_mesh(sites, seed)`) count their minutes from the first one sent
    (the first back-filled minute).
    """
    log = log or logging.getLogger("nettel.demo")
    stop = stop or threading.Event()
    session = _BrokerSession(brokers, user, password, stop, log)
    feed = _Feed(build_mesh(sites, seed), seed, faults, session, clock, log)
    try:
        if session.connect():
            current = int(clock() // 60)
            _backfill(feed, range(current - backfill_minutes, current), stop, log)
            if realtime:
                _follow(feed, current, stop, clock, log)
    finally:
        session.close()
    log.info("demo feed stopped messages=%d", feed.sent)
    return feed.sent


def _backfill(feed: _Feed, minutes: range, stop: threading.Event, log: logging.Logger) -> None:
    started = time.monotonic()
    for minute in minutes:
        if stop.is_set():
            return
        feed.publish(minute)
    log.info(
        "backfill done minutes=%d messages=%d seconds=%.1f",
        len(minutes),
        feed.sent,
        time.monotonic() - started,
    )


def _follow(
    feed: _Feed,
    minute: int,
    stop: threading.Event,
    clock: Callable[[], float],
    log: logging.Logger,
) -> None:
    """Publish `minute` and every later one once it has ended, until `stop` is set."""
    while not stop.is_set():
        wait = (minute + 1) * 60 + PUBLISH_LAG_S - clock()
        if wait > 0:
            stop.wait(min(wait, POLL_S))
            continue
        feed.publish(minute)
        log.info("published minute=%d ts=%d messages=%d", minute, minute * 60, feed.sent)
        minute += 1
