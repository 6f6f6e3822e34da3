"""Served vs evaluated congestion probability of a bundle (default: the shipped one).

    python -m benchmarks.served_calibration [--bundle DIR] [--sites 8] [--seed 11]

Simulates the last few minutes of a family-B mesh (`simulation.simulator_fluid`), builds their
dataset rows and scores the newest row of each link as `nettel evaluate` does (`predict`, then
`calibrated_estimates`); replays the same minutes into the state of a `nettel serve` runtime and
recomputes its matrix. Prints one JSON document: links compared, the largest absolute difference
between served and evaluated `congestion_probability` (target <= 1e-6; the served value is
rounded to 6 digits) and the range of the probabilities.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from service.analysis.calibration import calibrated_estimates
from service.analysis.features import FEATURE_NAMES
from service.config import DEFAULT_BUNDLE, Settings
from service.model.bundle import load_bundle
from service.parse.records import LinkEndpoints
from service.runtime import build_runtime
from service.state.link_state import LinkState
from simulation.simulator_fluid import build_fluid_mesh, simulate_fluid_minutes, simulate_traffic
from training.dataset import WARMUP_MINUTES, build_fluid_dataset, mesh_endpoints, minute_messages
from training.evaluate import predict

ROWS = 4


def replay_fluid_mesh(
    state: LinkState, sites: int, seed: int, start: int, rows: int
) -> list[LinkEndpoints]:
    """Apply the warm-up and `rows` minutes from `start` of a family-B mesh to `state`, as
    ingest would (the minutes `build_fluid_dataset` builds rows of); the endpoints of its links."""
    mesh = build_fluid_mesh(sites, seed)
    first = start - WARMUP_MINUTES
    traffic = simulate_traffic(mesh, first - 1, WARMUP_MINUTES + rows + 1, seed)
    endpoints = mesh_endpoints(mesh.hosts)
    for measured in simulate_fluid_minutes(mesh, traffic, seed, first_minute=first):
        state.apply_batch(minute_messages(measured, endpoints), (measured.minute + 1) * 60.0)
    return endpoints


def measure(bundle_dir: Path, sites: int, seed: int) -> dict[str, Any]:
    start = int(time.time() // 60) - ROWS  # recent minutes, so the served view is current
    dataset = build_fluid_dataset(sites, ROWS / 1440, seed, "nettel", start)
    bundle = load_bundle(bundle_dir, FEATURE_NAMES)
    if bundle.calibration is None:
        raise SystemExit(f"{bundle_dir}: the bundle has no calibration")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE)
    parser.add_argument("--sites", type=int, default=8)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    print(json.dumps(measure(args.bundle, args.sites, args.seed), indent=2))


if __name__ == "__main__":
    main()
