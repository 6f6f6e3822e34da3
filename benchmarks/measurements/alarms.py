"""Alarms: what raising them adds to a matrix recompute, and their memory per link."""

from __future__ import annotations

import gc
import time
from typing import cast

import numpy as np

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult, median
from benchmarks.support.link_fill import advance_minute, build_full_state
from benchmarks.support.model import shipped_model
from service.alarms.baseline import BYTES_PER_LINK
from service.alarms.book import AlarmBook
from service.alarms.engine import AlarmEngine
from service.alarms.service import AlarmService
from service.analysis.link_analysis import LinkAnalysis
from service.analysis.predictor import UtilisationPredictor
from service.matrix.cycle import CycleObservers, MatrixCycle
from service.matrix.snapshot import CostMatrix
from service.state.link_state import StateView

NAME = "alarms"
#: The cycle's time may grow by at most this share with alarms on.
OVERHEAD_TARGET = 0.10
#: Seconds between the recomputes of a round within one minute (data-triggered, --freshness).
CYCLE_GAP_S = 1.0
METHOD = (
    "A LinkState of the largest cycle size is filled as for `cycle` (all 32 slots of every "
    "link hold plausible delay and loss, about 5 % of the links queueing) and two "
    "`MatrixCycle`s share it, one without alarms and one with the `AlarmService` as its "
    "analysis observer (the short profile, as `nettel serve` builds it), both on a test clock "
    "and with the shipped model. First the alarms catch up on the window (31 minutes at once, "
    "the first cycle after a start), then each round writes the next minute into every link "
    "(`advance_minute`) and moves the clock to 31 s after it ended, so that the round's first "
    "recompute with alarms evaluates that minute (rules, latches, baseline, grouping: the work "
    "of one minute), and a second recompute one second later has nothing to evaluate (the "
    "other 59 or so recomputes of a minute at --freshness 1 s); the two cycles take turns "
    "within a round, so that a change in the machine's speed hits both alike. Times are "
    "`MatrixCycle.recompute()` until its snapshot is served (`serve_seconds`, as in `cycle`), "
    "plus the alarms' own time (they run right after). Memory: the engine's arrays per link "
    "after the rounds, the delay baseline's share stated."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    result = MeasurementResult(NAME, "Alarms: recompute time with alarms on and off", METHOD)
    n = max(ctx.sizes.cycle_links)
    rounds = ctx.sizes.cycle_repeats
    model = cast(UtilisationPredictor | None, shipped_model())
    result.add("model", "predictor", model.info.version if model else "none (no bundle)")
    clock = Clock(time.time())
    ctx.log(f"alarms: filling {n:,} links")
    state = build_full_state(n, clock.now)
    minute = int(clock.now // 60) - 1  # the newest minute the fill wrote
    clock.now = (minute + 1) * 60 + 31.0
    book = AlarmBook()
    service = AlarmService(book, AlarmEngine(book))
    observer = TimedObserver(service)
    plain = MatrixCycle(state, 3600.0, model, clock=clock)
    alarmed = MatrixCycle(
        state, 3600.0, model, clock=clock, observers=CycleObservers(analysed=(observer,))
    )
    plain.recompute()
    gc.collect()
    catch_up = timed_recompute(alarmed, observer)
    rng = np.random.default_rng(7)
    off: list[float] = []
    on_minute: list[float] = []
    on_quiet: list[float] = []
    ctx.log(f"alarms: {rounds} rounds at {n:,} links")
    for _ in range(rounds):
        minute += 1
        advance_minute(state.buffers, n, minute, rng)
        clock.now = (minute + 1) * 60 + 31.0
        off.append(timed_recompute(plain, None))
        on_minute.append(timed_recompute(alarmed, observer))
        clock.now += CYCLE_GAP_S
        on_quiet.append(timed_recompute(alarmed, observer))
    assert service.engine.last_minute == minute
    figures(result, n, off, on_minute, on_quiet, catch_up)
    engine_bytes = engine_nbytes(service.engine)
    result.add("baseline_bytes_per_link", "delay baseline per link", BYTES_PER_LINK, "B")
    result.add("engine_bytes_per_link", "all alarm arrays per link", engine_bytes / n, "B")
    result.add(
        "open_alarms", "alarms open at the end (synthetic mesh)", len(service.book.open_alarms())
    )
    result.details["times"] = {"off": off, "on_minute": on_minute, "on_quiet": on_quiet}
    return result


def figures(
    result: MeasurementResult,
    n: int,
    off: list[float],
    on_minute: list[float],
    on_quiet: list[float],
    catch_up: float,
) -> None:
    base, minute, quiet = median(off), median(on_minute), median(on_quiet)
    label = f"{n:,} links"
    result.add("off_median", f"{label}: recompute without alarms, median", base, "s")
    result.add("minute_median", f"{label}: recompute that evaluates a minute, median", minute, "s")
    result.add("quiet_median", f"{label}: recompute with nothing to evaluate, median", quiet, "s")
    result.add("catch_up", f"{label}: first recompute after a start (31 minutes)", catch_up, "s")
    minute_share = minute / base - 1
    quiet_share = quiet / base - 1
    # at --freshness 1 s about 60 recomputes a minute: one evaluates, the others do not
    per_minute = (minute - base + 59 * (quiet - base)) / 60
    result.add(
        "minute_overhead", "more time, the recompute that evaluates a minute", minute_share, "x"
    )
    result.add(
        "quiet_overhead", "more time, a recompute with nothing to evaluate", quiet_share, "x"
    )
    result.add(
        "mean_overhead", "more time on average, 60 recomputes a minute", per_minute / base, "x"
    )
    result.target(
        "minute_overhead",
        f"recompute at {label} with alarms (evaluating a minute) vs without",
        minute_share,
        "<=",
        OVERHEAD_TARGET,
        "x",
    )


def timed_recompute(cycle: MatrixCycle, observer: TimedObserver | None) -> float:
    """A recompute's time until its snapshot is served, plus the alarms' (run right after)."""
    cycle.recompute()
    return cycle.serve_seconds + (observer.last_seconds if observer else 0.0)


class TimedObserver:
    """The alarms as the cycle's analysis observer, timed."""

    def __init__(self, service: AlarmService) -> None:
        self.service = service
        self.last_seconds = 0.0

    def __call__(self, view: StateView, analysis: LinkAnalysis, matrix: CostMatrix) -> None:
        started = time.perf_counter()
        self.service.after_cycle(view, analysis, matrix)
        self.last_seconds = time.perf_counter() - started


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def engine_nbytes(engine: AlarmEngine) -> int:
    arrays: list[np.ndarray] = [engine.baseline.weights, engine.baseline.value_sum]
    arrays.append(engine.baseline.log_jitter_sum)
    arrays += [engine.baseline.offset, engine.threshold, engine.mean, engine.jitter]
    for latches in engine.latches.values():
        arrays += [latches.held, latches.clean, latches.latched, latches.onset]
    arrays += [engine.ends.source_host, engine.ends.destination_host]
    return sum(array.nbytes for array in arrays)
