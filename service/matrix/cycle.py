"""Recomputes the cost matrix on a schedule and when a burst of data has settled."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from service.analysis.link_analysis import analyse_links
from service.analysis.predictor import UtilisationPredictor
from service.ingest.pipeline import IngestPipeline
from service.matrix.snapshot import CostMatrix, build_cost_matrix

#: New data followed by this much quiet (seconds) counts as a completed back-fill.
SETTLE_SECONDS = 1.0
TICK_SECONDS = 0.25


class MatrixCycle:
    """Owns the latest immutable CostMatrix; readers just read `latest` (one reference swap)."""

    def __init__(
        self,
        pipeline: IngestPipeline,
        interval: float,
        predictor: UtilisationPredictor | None = None,
        clock: Callable[[], float] = time.time,
        log: logging.Logger | None = None,
    ) -> None:
        self.latest: CostMatrix | None = None
        self.predictor = predictor
        self.cycle_observers: list[Callable[[float], None]] = []
        self.matrix_observers: list[Callable[[CostMatrix | None, CostMatrix], None]] = []
        self._pipeline = pipeline
        self._interval = interval
        self._clock = clock
        self._log = log or logging.getLogger("nettel.cycle")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="matrix-cycle", daemon=True)
        self._applied_at_last_cycle = -1

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def recompute(self) -> CostMatrix:
        """Analyse a consistent copy of the state and publish the new snapshot."""
        started = time.perf_counter()
        with self._pipeline.lock:
            view = self._pipeline.state.view(self._clock())
            self._applied_at_last_cycle = self._pipeline.counters.datapoints_applied
        predictor = self.predictor
        analysis = analyse_links(view, predictor)
        info = predictor.info if predictor is not None else None
        previous, self.latest = self.latest, build_cost_matrix(view, analysis, info, view.taken_at)
        elapsed = time.perf_counter() - started
        for observe in self.cycle_observers:
            observe(elapsed)
        for publish in self.matrix_observers:
            publish(previous, self.latest)
        return self.latest

    def _run(self) -> None:
        last_cycle = float("-inf")
        while not self._stop.wait(TICK_SECONDS):
            now = time.monotonic()
            if now - last_cycle >= self._interval or self._burst_settled():
                try:
                    self.recompute()
                except Exception:  # a failed cycle keeps the previous snapshot in service
                    self._log.exception("matrix recompute failed")
                last_cycle = now

    def _burst_settled(self) -> bool:
        counters = self._pipeline.counters
        fresh = counters.datapoints_applied != self._applied_at_last_cycle
        last = counters.last_message_at
        return fresh and last is not None and self._clock() - last >= SETTLE_SECONDS
