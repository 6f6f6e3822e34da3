"""Start: process start -> /readyz 200, cold and with a state snapshot of 15,000 links."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult, median
from benchmarks.support.broker import measurement_broker
from benchmarks.support.link_fill import write_snapshot
from benchmarks.support.model import serve_model_args
from devtools.service_process import launch_service, wait_for_status
from service.persistence.snapshot_store import SNAPSHOT_NAME

NAME = "start"
METHOD = (
    "`python -m service serve` is launched (default settings, its own client id, `--model none` "
    "when no bundle is shipped) against a private broker that is already up; the time runs from "
    "just before the process is spawned until `GET /readyz` (polled every 20 ms) first answers "
    "200, i.e. broker connected and a first matrix computed. Cold = no state; warm = "
    "`--state-dir` holding a snapshot of L full links (a fresh copy each time). Each variant is "
    "repeated and the median reported; the process is stopped with SIGTERM between runs."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    result = MeasurementResult(NAME, "Start: process start to /readyz 200", METHOD)
    template = ctx.work / "start-snapshot"
    size = write_snapshot(template, sizes.start_links, time.time())
    result.add("snapshot_bytes", f"snapshot of {sizes.start_links:,} links", size, "B")
    with measurement_broker(ctx, "start") as broker:
        cold = [
            _start_once(ctx, broker.brokers, f"cold-{i}", None) for i in range(sizes.start_repeats)
        ]
        warm = [
            _start_once(ctx, broker.brokers, f"warm-{i}", template)
            for i in range(sizes.start_repeats)
        ]
    result.add("cold_median", f"cold: median of {len(cold)}", median(cold), "s")
    result.add("cold_max", "cold: max", max(cold), "s")
    result.add(
        "warm_median",
        f"with {sizes.start_links:,}-link snapshot: median of {len(warm)}",
        median(warm),
        "s",
    )
    result.add("warm_max", "with snapshot: max", max(warm), "s")
    result.target("cold_median", "cold start to ready (median)", median(cold), "<=", 3.0, "s")
    result.details["cold"] = cold
    result.details["warm"] = warm
    return result


def _start_once(ctx: SuiteContext, brokers: str, name: str, snapshot_dir: Path | None) -> float:
    args = [*serve_model_args(), "--client-id", f"bench-start-{name}"]
    if snapshot_dir is not None:
        state_dir = ctx.work / f"state-{name}"
        state_dir.mkdir(parents=True)
        shutil.copy(snapshot_dir / SNAPSHOT_NAME, state_dir / SNAPSHOT_NAME)
        args += ["--state-dir", str(state_dir)]
    ctx.log(f"start: {name}")
    service = launch_service(brokers, args, ctx.logs / f"start-{name}.log")
    try:
        ready_at = wait_for_status(service, "/readyz", 200, timeout=60, interval=0.02)
    finally:
        service.stop()
    return ready_at - service.launched_at
