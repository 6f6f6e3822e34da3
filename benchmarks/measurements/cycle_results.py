"""Cycle with throughput results: what serving every link's latest test adds to a recompute."""

from __future__ import annotations

import gc
import time
from typing import cast

import numpy as np

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult, median
from benchmarks.sizes import FULL, QUICK
from benchmarks.support.link_fill import build_full_state
from benchmarks.support.model import shipped_model
from service.analysis.predictor import UtilisationPredictor
from service.matrix.cycle import MatrixCycle
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import LinkState
from service.state.throughput_state import ThroughputState

NAME = "cycle_results"
#: Seconds between two recomputes (--freshness 1 s with data arriving all the time).
GAP_S = 1.0
#: A throughput test every this many seconds per link (WLCG's meshes: 4 to 6 hours).
TEST_EVERY_S = 14_400
METHOD = (
    "A LinkState of the largest `cycle` size is filled (`build_full_state`: every link's "
    "32-minute window full) and every link gets three weeks of throughput tests, one every "
    f"{TEST_EVERY_S // 3600} hours at its own second, the latest within the last "
    f"{TEST_EVERY_S // 3600} hours. Two `MatrixCycle`s (the shipped model, a test clock) "
    "recompute it in turns, one seeing the tests, the other the same state with empty "
    "throughput columns; after a first recompute each, as many rounds as `cycle` "
    f"({FULL.cycle_repeats}; {QUICK.cycle_repeats} at quick sizes): each round changes a "
    f"contiguous sixtieth of the links' newest loss (as `cycle`), moves the clock {GAP_S:g} s on "
    "and lets both recompute (timed until served, `serve_seconds`). With tests, each recompute "
    "also takes the links' results with its view, "
    "and the records whose `throughput_age_s` moved on a step (10 minutes at each link's "
    "test second: about 1/600 of the links a second, spread over the body) are rebuilt: the "
    "difference of the two is what serving throughput adds."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    result = MeasurementResult(NAME, "Cycle with throughput results", METHOD)
    model = cast(UtilisationPredictor | None, shipped_model())
    n = ctx.sizes.cycle_links[-1]
    now = float(int(time.time()))
    clock = [now]
    ctx.log(f"cycle_results: filling {n:,} links and their throughput tests")
    state = build_full_state(n, now)
    fill_tests(state, n, now, np.random.default_rng(7))
    tested, untested = state.throughput, ThroughputState(state.throughput.columns.capacity)
    cycles = {
        kind: MatrixCycle(state, 3600.0, model, clock=lambda: clock[0])
        for kind in ("without", "with")
    }
    times: dict[str, list[float]] = {kind: [] for kind in cycles}
    gc.collect()
    for step in range(-1, ctx.sizes.cycle_repeats):  # a first recompute each, untimed
        clock[0] += GAP_S
        touch_loss(state, np.arange(step * n // 60, (step + 1) * n // 60) % n)
        for kind, cycle in cycles.items():
            state.throughput = tested if kind == "with" else untested
            cycle.recompute()
            if step >= 0:
                times[kind].append(cycle.serve_seconds)
    without, with_tests = median(times["without"]), median(times["with"])
    result.add("links", "links (every one tested, in the state with tests)", n)
    result.add("median_without", f"{n:,} links without tests: median recompute", without, "s")
    result.add("median_with", f"{n:,} links, every one tested: median recompute", with_tests, "s")
    result.add(
        "max_with", f"{n:,} links, every one tested: slowest recompute", max(times["with"]), "s"
    )
    result.add(
        "added", "what serving the tests adds (median difference)", with_tests - without, "s"
    )
    result.target(
        "median_with", f"median recompute at {n:,} tested links", with_tests, "<=", 1.0, "s"
    )
    result.details["times"] = times
    return result


def fill_tests(state: LinkState, n: int, now: float, rng: np.random.Generator) -> None:
    """Every link's tests of the throughput history's window, oldest first, each link at its
    own phase and second."""
    rows = np.arange(n)
    phase = rng.uniform(0, TEST_EVERY_S, n)
    earliest = ThroughputState.window_start(now)
    count = int((now - earliest) // TEST_EVERY_S)
    for back in range(count - 1, -1, -1):
        times = (now - phase - back * TEST_EVERY_S).astype(np.int64)
        state.throughput.add_rates(rows, times, rng.uniform(1e8, 9e9, n))


def touch_loss(state: LinkState, rows: np.ndarray) -> None:
    """A new loss value in the newest minute of `rows` (as `cycle` changes them)."""
    slots = state.buffers.latest_minute[rows] % WINDOW_MINUTES
    state.buffers.series["loss"][rows, slots] += np.float32(0.001)
