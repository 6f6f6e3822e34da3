"""Recomputes the cost matrix every `interval`, and soon after new data arrives.

New data reaches the matrix within about `freshness` seconds: a data-triggered recompute starts
`freshness` minus the last recompute's duration after the previous one started, so that data
arriving just after one copied the state is in the next one's matrix `freshness` seconds later.
Recomputes start at least five times their CPU time apart, though, so that at any link count they
take at most about a fifth of a core (CPU time of the cycle thread, not wall time: under ingest
load a cycle waits for the GIL, and its wall time would space recomputes out for time it did not
use), and not while ingest is behind (the `behind` callable, e.g. ingest's debounced
`BacklogWatch`: a back-fill or burst being worked off; every `interval` still recomputes). A
completed back-fill is thus in the matrix about `freshness` seconds after its last message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from service.analysis.link_analysis import LinkAnalysis, analyse_links
from service.analysis.predictor import UtilisationPredictor
from service.config import EmpiricalFilterInput
from service.lifecycle import BackgroundLoop
from service.matrix.snapshot import CostMatrix, build_cost_matrix
from service.memory import FreeMemoryReleaser
from service.state.link_state import LinkResults, LinkState, StateView

TICK_SECONDS = 0.1


class AnalysisObserver(Protocol):
    """Told of each recompute's view, analysis and matrix, and the throughput and path results
    of the view's links (taken with the view: the same rows)."""

    def __call__(
        self,
        view: StateView,
        analysis: LinkAnalysis,
        matrix: CostMatrix,
        results: LinkResults | None = None,
    ) -> None: ...


#: Recomputes are at least this many times the last one's CPU time apart.
DUTY_FACTOR = 5.0


def recompute_gap(freshness: float, last_seconds: float, last_cpu_seconds: float) -> float:
    """Least time from one recompute's start to the next data-triggered one's, given how long
    the last one took (wall and CPU time)."""
    return max(freshness - last_seconds, DUTY_FACTOR * last_cpu_seconds)


class ServedMatrix:
    """The cost matrix in service: one reference the cycle swaps and every reader reads (the
    publishers and the metrics hold it from before the cycle exists)."""

    def __init__(self) -> None:
        self.latest: CostMatrix | None = None


@dataclass(frozen=True)
class CycleObservers:
    """Everything a recompute calls, by when (each kind in its order):

    - `recomputed`: with the recompute's duration, once the new snapshot is served;
    - `analysed`: with the view it analysed, the analysis, the snapshot and the view's links'
      throughput and path results (e.g. the alarms);
    - `prepare`: with the snapshot, to build what queries read once per snapshot;
    - `published`: with the previous and the new snapshot (streams, telemetry).
    """

    recomputed: tuple[Callable[[float], None], ...] = ()
    analysed: tuple[AnalysisObserver, ...] = ()
    prepare: tuple[Callable[[CostMatrix], None], ...] = ()
    published: tuple[Callable[[CostMatrix | None, CostMatrix], None], ...] = ()


class MatrixCycle:
    """Swaps the latest immutable CostMatrix into `served`; readers just read `latest`."""

    name = "matrix-cycle"

    def __init__(
        self,
        state: LinkState,
        interval: float,
        predictor: UtilisationPredictor | None = None,
        freshness: float = 1.0,
        clock: Callable[[], float] = time.time,
        log: logging.Logger | None = None,
        behind: Callable[[], bool] = lambda: False,
        empirical_filter: EmpiricalFilterInput = "newest-minute",
        monotonic: Callable[[], float] = time.monotonic,
        observers: CycleObservers = CycleObservers(),
        served: ServedMatrix | None = None,
    ) -> None:
        """`behind` tells whether ingest is behind now (polled every tick); `clock` dates the
        snapshots, `monotonic` schedules the recomputes; `observers` are what each recompute
        calls; `served` holds the snapshot in service (a new one when None)."""
        self.served = served if served is not None else ServedMatrix()
        self.predictor = predictor
        self.observers = observers
        self._state = state
        self._interval = interval
        self._freshness = freshness
        self._last_seconds = self._last_cpu_seconds = 0.0
        self._release_free_memory = FreeMemoryReleaser()
        self._clock = clock
        self._monotonic = monotonic
        self._behind = behind
        self._empirical_filter: EmpiricalFilterInput = empirical_filter
        self._log = log or logging.getLogger("nettel.cycle")
        self._loop = BackgroundLoop.once(self.name, self._run)
        self._stored_at_last_cycle = -1

    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._loop.stop(timeout)

    @property
    def latest(self) -> CostMatrix | None:
        return self.served.latest

    @latest.setter
    def latest(self, matrix: CostMatrix | None) -> None:
        self.served.latest = matrix

    @property
    def serve_seconds(self) -> float:
        """How long the last recompute took to serve its snapshot (views built after)."""
        return self._last_seconds

    def recompute(self) -> CostMatrix:
        """Analyse a consistent copy of the state, serve the new snapshot, then build the views
        queries read (site pairs, endpoint index, snapshot preparers) once, in this thread. New
        data is served without waiting for them: at 100,000 links of one site pair each they
        take longer than the analysis; a query that comes first builds what it reads itself,
        once per snapshot (they are memoised)."""
        started, cpu_started = time.perf_counter(), time.thread_time()
        view, results, analysis, matrix = self._build(self.latest)
        previous, self.latest = self.latest, matrix
        elapsed = self._last_seconds = time.perf_counter() - started
        observers = self.observers
        for observe in observers.recomputed:
            observe(elapsed)
        for observe_analysis in observers.analysed:
            observe_analysis(view, analysis, matrix, results)
        del view, results, analysis
        matrix.prepare_views()
        for prepare in observers.prepare:
            prepare(matrix)
        for publish in observers.published:
            publish(previous, matrix)
        self._release_free_memory()  # after _build's view and analysis are gone
        self._last_cpu_seconds = time.thread_time() - cpu_started
        return self.latest

    def _build(
        self, previous: CostMatrix | None
    ) -> tuple[StateView, LinkResults, LinkAnalysis, CostMatrix]:
        now = self._clock()
        with self._state.frozen():  # the results of the view's links, in its order
            view = self._state.view(now)
            results = self._state.results(now)
        self._stored_at_last_cycle = view.stored_total
        predictor = self.predictor
        analysis = analyse_links(view, predictor, self._empirical_filter)
        info = predictor.info if predictor is not None else None
        matrix = build_cost_matrix(view, analysis, info, view.taken_at, previous, results)
        return view, results, analysis, matrix

    def _run(self) -> None:
        last_start = float("-inf")
        while not self._loop.wait(TICK_SECONDS):
            now = self._monotonic()
            behind = self._behind()
            since = now - last_start
            gap = recompute_gap(self._freshness, self._last_seconds, self._last_cpu_seconds)
            if since >= self._interval or (self._has_new_data() and since >= gap and not behind):
                last_start = self._monotonic()
                try:
                    self.recompute()
                except Exception:  # a failed cycle keeps the previous snapshot in service
                    self._log.exception("matrix recompute failed")

    def _has_new_data(self) -> bool:
        return self._state.stored_total != self._stored_at_last_cycle
