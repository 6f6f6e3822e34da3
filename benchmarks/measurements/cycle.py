"""Cycle: one full matrix recompute (view copy, analysis incl. inference, serialisation)."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import cast

import numpy as np

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult, median
from benchmarks.support.link_fill import build_full_state
from benchmarks.support.model import shipped_model
from service.analysis.link_analysis import analyse_links
from service.analysis.predictor import UtilisationPredictor
from service.matrix.cycle import MatrixCycle
from service.matrix.snapshot import build_cost_matrix
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import LinkState

NAME = "cycle"
PHASE_REPEATS = 3
#: Rounds of the scattered-change pattern (reported, no target).
SCATTERED_ROUNDS = 6
METHOD = (
    "For each size, a LinkState is filled directly (index through its API, buffers with numpy: "
    "all 32 slots of every link hold plausible delay and loss, archived moments hold a long "
    "history) and `MatrixCycle.recompute()` - the service's own cycle: consistent view copy "
    "under the ingest lock, `analyse_links` (features, empirical filter, one batched predictor "
    "call with the shipped model when there is one, cost) and `build_cost_matrix` (link records, "
    "orjson body, ETag) - runs once to warm up; then the sizes take turns, one cycle each per "
    "round for the stated number of rounds, so that a change in the machine's speed during the "
    "run affects every size alike. A cycle's time is until its snapshot is served "
    "(`MatrixCycle.serve_seconds`); the views queries read (site pairs, endpoint index, ALTO "
    "maps, metrics' site pairs) are built right after, and the median with them is given too. "
    "A few extra passes time the three phases separately. The timed rounds change a contiguous "
    "sixtieth of the links (a collector's round robin); a further "
    f"{SCATTERED_ROUNDS} rounds change a sixtieth chosen at random (a mesh whose links report "
    "at scattered moments), so that every block of the body has changed links."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    result = MeasurementResult(NAME, "Cycle: one full recompute", METHOD)
    # ModelBundle is a frozen dataclass, so mypy sees read-only fields where the protocol has
    # plain attributes; it satisfies UtilisationPredictor at run time.
    model = cast(UtilisationPredictor | None, shipped_model())
    result.add("model", "predictor", model.info.version if model else "none (no bundle)")
    sizes = ctx.sizes.cycle_links
    cycles: dict[int, tuple[LinkState, MatrixCycle]] = {}
    warm_up: dict[int, float] = {}
    for n in sizes:
        ctx.log(f"cycle: filling {n:,} links")
        state = build_full_state(n, time.time())
        cycles[n] = state, MatrixCycle(state, 3600.0, model)
        gc.collect()
        warm_up[n] = _timed(cycles[n][1].recompute)
    ctx.log(f"cycle: {ctx.sizes.cycle_repeats} rounds over {len(sizes)} sizes")
    times: dict[int, list[float]] = {n: [] for n in sizes}
    with_views: dict[int, list[float]] = {n: [] for n in sizes}
    for step in range(ctx.sizes.cycle_repeats):  # sizes interleaved: drift hits all alike
        for n, (state, cycle) in cycles.items():
            _new_minute_for_a_sixtieth(state, step)
            with_views[n].append(_timed(cycle.recompute))
            times[n].append(cycle.serve_seconds)
    scattered: dict[int, list[float]] = {n: [] for n in sizes}
    rng = np.random.default_rng(5)
    for _ in range(SCATTERED_ROUNDS):
        for n, (state, cycle) in cycles.items():
            _new_minute_for_a_random_sixtieth(state, rng)
            cycle.recompute()
            scattered[n].append(cycle.serve_seconds)
    phase_rows = []
    for n, (state, cycle) in cycles.items():
        _size_figures(result, n, cycle, times[n], warm_up[n])
        label = f"{n:,} links: median with the views queries read built after (site pairs, ...)"
        result.add(f"with_views_median_{_key(n)}", label, median(with_views[n]), "s")
        label = f"{n:,} links: median of {SCATTERED_ROUNDS}, a random sixtieth changed"
        result.add(f"scattered_median_{_key(n)}", label, median(scattered[n]), "s")
        phases = _phases(state, model)
        phase_rows.append(
            [f"{n:,}", *(f"{1000 * phases[k]:.1f}" for k in ("view", "analyse", "build"))]
        )
    _growth(result, {n: median(times[n]) for n in sizes}, sizes)
    result.details["tables"] = [
        {
            "title": "Median time per phase (ms)",
            "columns": ["links", "view copy", "analyse_links", "build_cost_matrix"],
            "rows": phase_rows,
        }
    ]
    return result


def _size_figures(
    result: MeasurementResult, n: int, cycle: MatrixCycle, times: list[float], warm_up: float
) -> None:
    matrix = cycle.latest
    assert matrix is not None and len(matrix.links) == n
    key = _key(n)
    repeats = len(times)
    result.add(f"median_{key}", f"{n:,} links: median of {repeats}", median(times), "s")
    result.add(f"max_{key}", f"{n:,} links: max of {repeats}", max(times), "s")
    result.add(f"warmup_{key}", f"{n:,} links: first cycle (all links new)", warm_up, "s")
    result.add(f"per_link_{key}", f"{n:,} links: median per link", 1e6 * median(times) / n, "µs")
    result.add(f"body_{key}", f"{n:,} links: JSON body", matrix.encoded.size, "B")
    result.details[f"times_{key}"] = times


def _new_minute_for_a_sixtieth(state: LinkState, step: int) -> None:
    """Steady state: each link reports once a minute and the matrix is recomputed every second,
    so about 1/60 of the links change between two cycles (their newest loss value here)."""
    n = len(state)
    _touch_loss(state, np.arange(step * n // 60, (step + 1) * n // 60) % n)


def _touch_loss(state: LinkState, rows: np.ndarray) -> None:
    slots = state.buffers.latest_minute[rows] % WINDOW_MINUTES
    state.buffers.series["loss"][rows, slots] += np.float32(0.001)


def _new_minute_for_a_random_sixtieth(state: LinkState, rng: np.random.Generator) -> None:
    n = len(state)
    _touch_loss(state, rng.choice(n, n // 60, replace=False))


def _phases(state: LinkState, model: UtilisationPredictor | None) -> dict[str, float]:
    timings: dict[str, list[float]] = {"view": [], "analyse": [], "build": []}
    for _ in range(PHASE_REPEATS):
        started = time.perf_counter()
        view = state.view(time.time())
        viewed = time.perf_counter()
        analysis = analyse_links(view, model)
        analysed = time.perf_counter()
        build_cost_matrix(view, analysis, model.info if model else None, view.taken_at)
        built = time.perf_counter()
        timings["view"].append(viewed - started)
        timings["analyse"].append(analysed - viewed)
        timings["build"].append(built - analysed)
    return {phase: median(values) for phase, values in timings.items()}


def _growth(result: MeasurementResult, medians: dict[int, float], sizes: tuple[int, ...]) -> None:
    small, middle, large = sizes
    link_ratio = large / middle
    time_ratio = medians[large] / medians[middle]
    exponent = math.log(time_ratio) / math.log(link_ratio)
    result.add("time_ratio", f"time ratio {large:,} / {middle:,} links", time_ratio, "x")
    result.add("link_ratio", f"link ratio {large:,} / {middle:,}", link_ratio, "x")
    result.add("growth_exponent", "growth exponent log(time ratio) / log(link ratio)", exponent)
    result.target(
        f"median_{_key(middle)}",
        f"median cycle at {middle:,} links",
        medians[middle],
        "<=",
        0.1,
        "s",
    )
    result.target(
        f"median_{_key(large)}", f"median cycle at {large:,} links", medians[large], "<=", 1.0, "s"
    )
    result.target(
        "linear_growth",
        "time ratio / link ratio (no worse than linear)",
        time_ratio / link_ratio,
        "<=",
        1.0,
        "x",
    )


def _key(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 else str(n)


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started
