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
#: The alarms may add at most this share to a recompute.
OVERHEAD_TARGET = 0.10
#: Seconds between the recomputes of a round within one minute (data-triggered, --freshness).
CYCLE_GAP_S = 1.0
#: The times taken each round: recomputes until served, and the alarms' own.
TIMES = {
    "off": "recompute after a new minute, without alarms",
    "on": "the same, with alarms (until served; the alarms run after)",
    "alarms_minute": "the alarms of that recompute, evaluating the minute",
    "off_quiet": "recompute a second later (nothing new), without alarms",
    "on_quiet": "the same, with alarms",
    "alarms_quiet": "the alarms of that recompute, nothing to evaluate",
    "off_cpu": "CPU time of the recompute after a new minute without alarms, views included",
    "alarms_minute_cpu": "CPU time of the alarms evaluating the minute",
}
METHOD = (
    "A LinkState of the largest cycle size is filled as for `cycle` (all 32 slots of every "
    "link hold plausible delay and loss, about 5 % of the links queueing) and two "
    "`MatrixCycle`s share it, one without alarms and one with the `AlarmService` as its "
    "analysis observer (the short profile, as `nettel serve` builds it), both on a test clock "
    "and with the shipped model. First the alarms catch up on the window (31 minutes at once, "
    "the first cycle after a start), then each round writes the next minute into every link "
    "(`advance_minute`) and moves the clock to 31 s after it ended: each cycle recomputes "
    "(with alarms, the alarms evaluate that minute: rules, latches, baseline, grouping), then, "
    "one second later, each recomputes again with nothing new (the other 59 or so recomputes "
    "of a minute at --freshness 1 s: the alarms have nothing to evaluate). The two cycles take "
    "turns, so that a change in the machine's speed hits both alike. Recomputes are timed "
    "until their snapshot is served (`serve_seconds`, as in `cycle`); the alarms, which run "
    "right after serving, are timed on their own, and their time is given as a share of the "
    "paired recompute without alarms (on a shared machine the ratio of the two is steadier "
    "than the difference of two recomputes), and in CPU time of the cycle's thread against "
    "the whole recompute without alarms (views included, which `recompute` builds after "
    "serving). Memory: the engine's arrays per link after the rounds, the delay baseline's "
    "share stated."
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
    alarmed.recompute()  # the alarms catch up on the window
    catch_up = observer.last_seconds
    rng = np.random.default_rng(7)
    times: dict[str, list[float]] = {key: [] for key in TIMES}
    ctx.log(f"alarms: {rounds} rounds at {n:,} links")
    for _ in range(rounds):
        minute += 1
        advance_minute(state.buffers, n, minute, rng)
        clock.now = (minute + 1) * 60 + 31.0
        cpu_started = time.thread_time()
        plain.recompute()
        times["off_cpu"].append(time.thread_time() - cpu_started)
        times["off"].append(plain.serve_seconds)
        alarmed.recompute()
        times["on"].append(alarmed.serve_seconds)
        times["alarms_minute"].append(observer.last_seconds)
        times["alarms_minute_cpu"].append(observer.last_cpu_seconds)
        clock.now += CYCLE_GAP_S
        for key, cycle in (("off_quiet", plain), ("on_quiet", alarmed)):
            cycle.recompute()
            times[key].append(cycle.serve_seconds)
        times["alarms_quiet"].append(observer.last_seconds)
    assert service.engine.last_minute == minute
    figures(result, n, {key: median(values) for key, values in times.items()}, catch_up)
    engine_bytes = engine_nbytes(service.engine)
    result.add("baseline_bytes_per_link", "delay baseline per link", BYTES_PER_LINK, "B")
    result.add("engine_bytes_per_link", "all alarm arrays per link", engine_bytes / n, "B")
    opened = len(service.book.open_alarms())
    result.add("open_alarms", "alarms open at the end (synthetic mesh)", opened)
    result.details["times"] = times
    return result


def figures(result: MeasurementResult, n: int, medians: dict[str, float], catch_up: float) -> None:
    label = f"{n:,} links"
    for key, text in TIMES.items():
        result.add(f"{key}_median", f"{label}: {text}, median", medians[key], "s")
    result.add("catch_up", f"{label}: alarms of the first recompute after a start", catch_up, "s")
    minute = medians["alarms_minute"] / medians["off"]
    quiet = medians["alarms_quiet"] / medians["off_quiet"]
    # at --freshness 1 s about 60 recomputes a minute: one evaluates, the others do not
    spent = medians["alarms_minute"] + 59 * medians["alarms_quiet"]
    mean = spent / (medians["off"] + 59 * medians["off_quiet"])
    cpu = medians["alarms_minute_cpu"] / medians["off_cpu"]
    result.add("minute_overhead", "alarms / recompute, when a minute is evaluated", minute, "x")
    result.add("minute_cpu_share", "the same in CPU time (the recompute with its views)", cpu, "x")
    result.add("quiet_overhead", "alarms / recompute, nothing to evaluate", quiet, "x")
    result.add("mean_overhead", "alarms / recompute over a minute of 60 recomputes", mean, "x")
    result.target(
        "minute_overhead",
        f"time the alarms add to a recompute at {label} that evaluates a minute",
        minute,
        "<=",
        OVERHEAD_TARGET,
        "x",
    )


class TimedObserver:
    """The alarms as the cycle's analysis observer, timed."""

    def __init__(self, service: AlarmService) -> None:
        self.service = service
        self.last_seconds = self.last_cpu_seconds = 0.0

    def __call__(self, view: StateView, analysis: LinkAnalysis, matrix: CostMatrix) -> None:
        started, cpu_started = time.perf_counter(), time.thread_time()
        self.service.after_cycle(view, analysis, matrix)
        self.last_seconds = time.perf_counter() - started
        self.last_cpu_seconds = time.thread_time() - cpu_started


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
