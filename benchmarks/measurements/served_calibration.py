"""Served vs evaluated congestion probability of the shipped bundle, on a family-B mesh."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.context import SuiteContext, Unavailable
from benchmarks.report import MeasurementResult
from benchmarks.support.fluid_replay import replay_fluid_mesh
from service.analysis.calibration import calibrated_estimates
from service.analysis.features import FEATURE_NAMES
from service.config import DEFAULT_BUNDLE, Settings
from service.model.bundle import load_bundle
from service.runtime import build_runtime
from training.dataset import build_fluid_dataset
from training.evaluate import predict

NAME = "served_calibration"
ROWS = 4
SEED = 11
#: The served probability is rounded to 6 digits.
TARGET_DIFFERENCE = 1e-6
METHOD = (
    "In the suite's process: the last few minutes of a family-B mesh of S sites "
    "(`simulation.simulator_fluid`, seed 11) are simulated, their dataset rows built and the "
    "newest row of each link scored as `nettel evaluate` does (`predict`, then "
    "`calibrated_estimates`) with the shipped bundle; the same minutes are replayed into the "
    "state of a `nettel serve` runtime (`benchmarks/support/fluid_replay.py`) and its matrix "
    "recomputed. Reported: links compared, the largest absolute difference between served and "
    "evaluated `congestion_probability` (the served value is rounded to 6 digits) and the range "
    "of the probabilities."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    sites = ctx.sizes.calibration_sites
    ctx.log(f"served_calibration: {sites} sites")
    m = measure(DEFAULT_BUNDLE, sites, SEED)
    result = MeasurementResult(NAME, "Served calibration: served vs evaluated probability", METHOD)
    result.add("links", "links compared", m["links"])
    result.add(
        "max_abs_difference",
        "largest served - evaluated difference (absolute)",
        m["max_abs_difference"],
    )
    result.add("probability_min", "lowest probability", m["probability_min"])
    result.add("probability_max", "highest probability", m["probability_max"])
    result.target(
        "max_abs_difference",
        "largest served - evaluated probability difference",
        m["max_abs_difference"],
        "<=",
        TARGET_DIFFERENCE,
    )
    return result


def measure(bundle_dir: Path, sites: int, seed: int) -> dict[str, Any]:
    start = int(time.time() // 60) - ROWS  # recent minutes, so the served view is current
    dataset = build_fluid_dataset(sites, ROWS / 1440, seed, "nettel", start)
    bundle = load_bundle(bundle_dir, FEATURE_NAMES)
    if bundle.calibration is None:
        raise Unavailable(f"{bundle_dir}: the bundle has no calibration")
    last = dataset.select(dataset.minute == dataset.minute.max())
    evaluated, _, _ = calibrated_estimates(predict(bundle, last.features), bundle.calibration)
    runtime = build_runtime(Settings(model=str(bundle_dir), publish_telemetry=False))
    endpoints = replay_fluid_mesh(runtime.state, sites, seed, start, ROWS)
    served = {
        (link["source"], link["destination"]): link for link in runtime.cycle.recompute().links
    }
    differences = [
        abs(served[(endpoints[i].source, endpoints[i].destination)]["congestion_probability"] - p)
        for i, p in zip(last.link.tolist(), evaluated.tolist(), strict=True)
    ]
    return {
        "bundle": str(bundle_dir),
        "links": len(differences),
        "max_abs_difference": max(differences),
        "probability_min": float(evaluated.min()),
        "probability_max": float(evaluated.max()),
    }
