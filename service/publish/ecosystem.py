"""Everything that serves the matrix to other systems, wired onto the app and the cycle.

`register_ecosystem(app, runtime)` adds the ALTO, Rucio, stream and web routes and returns an
`Ecosystem` whose `start()` / `stop()` the app's lifespan calls: start attaches the matrix
observers (SSE wake-up, broker telemetry) and the telemetry thread, stop detaches them.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from types import FrameType
from typing import Generic, TypeVar

from fastapi import FastAPI, HTTPException

from service.matrix.cycle import MatrixCycle
from service.matrix.snapshot import CostMatrix
from service.matrix.views import aggregate_sites
from service.publish.alto import AltoView, build_alto_router
from service.publish.rucio import build_rucio_router, load_rse_map
from service.publish.stream import MatrixStream, build_stream_router
from service.publish.telemetry import TelemetryPublisher
from service.publish.web import add_web_view
from service.runtime import Runtime, broker_tls_files

T = TypeVar("T")
Observer = Callable[[CostMatrix | None, CostMatrix], None]


class SnapshotMemo(Generic[T]):
    """A value derived from a snapshot, rebuilt only when the snapshot changes."""

    def __init__(self, build: Callable[[CostMatrix], T]) -> None:
        self._build = build
        self._cached: tuple[CostMatrix, T] | None = None

    def __call__(self, matrix: CostMatrix) -> T:
        cached = self._cached
        if cached is None or cached[0] is not matrix:
            cached = (matrix, self._build(matrix))
            self._cached = cached
        return cached[1]


@dataclass
class Ecosystem:
    """Matrix observers and threads of the publishers; started and stopped by the lifespan."""

    cycle: MatrixCycle
    stream: MatrixStream
    telemetry: TelemetryPublisher | None
    _observers: list[Observer] = field(default_factory=list)

    def start(self) -> None:
        self._observers = [self.stream.observe]
        if self.telemetry is not None:
            self.telemetry.start()
            self._observers.append(self.telemetry.observe)
        self.cycle.matrix_observers.extend(self._observers)
        _close_streams_on_exit_signals(self.stream)

    def stop(self) -> None:
        for observer in self._observers:
            self.cycle.matrix_observers.remove(observer)
        self.stream.close()
        if self.telemetry is not None:
            self.telemetry.stop()


def register_ecosystem(app: FastAPI, runtime: Runtime) -> Ecosystem:
    """Add the ALTO, Rucio, stream and web routes to `app`; start/stop the returned object."""
    settings = runtime.settings
    site_links = SnapshotMemo(lambda matrix: aggregate_sites(matrix.links))
    alto_view = SnapshotMemo(lambda matrix: AltoView(matrix.links, site_links(matrix)))
    latest = partial(_latest_matrix, runtime.cycle)
    stream = MatrixStream(lambda: runtime.cycle.latest, site_links, settings.stream_cost_step)
    rse_map = load_rse_map(settings.rse_map) if settings.rse_map else None
    app.include_router(build_alto_router(lambda: alto_view(latest())))
    app.include_router(build_rucio_router(lambda: site_links(latest()), rse_map))
    app.include_router(build_stream_router(stream))
    add_web_view(app)
    return Ecosystem(runtime.cycle, stream, _telemetry_publisher(runtime))


def _latest_matrix(cycle: MatrixCycle) -> CostMatrix:
    matrix = cycle.latest
    if matrix is None:
        raise HTTPException(503, "no cost matrix computed yet")
    return matrix


def _telemetry_publisher(runtime: Runtime) -> TelemetryPublisher | None:
    settings = runtime.settings
    if not settings.publish_telemetry:
        return None
    return TelemetryPublisher(
        settings.brokers,
        settings.telemetry_topic,
        user=settings.broker_user,
        passcode=settings.broker_passcode(),
        heartbeat_ms=settings.heartbeat_ms,
        tls=broker_tls_files(settings),
        min_interval=settings.interval,
    )


def _close_streams_on_exit_signals(stream: MatrixStream) -> None:
    """uvicorn waits for open responses before the lifespan shutdown, so SSE streams would hold
    SIGTERM/SIGINT forever: end them first, then let the server's own handler run."""
    if threading.current_thread() is not threading.main_thread():
        return  # e.g. a test client's lifespan thread; there is no server signal handling
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)
        if callable(previous):
            signal.signal(signum, partial(_close_then, stream, previous))


def _close_then(
    stream: MatrixStream,
    previous: Callable[[int, FrameType | None], object],
    signum: int,
    frame: FrameType | None,
) -> None:
    stream.close()
    previous(signum, frame)
