"""The decision benchmark: transfer times by policy on the committed decision captures."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.context import SuiteContext, Unavailable
from benchmarks.report import MeasurementResult
from benchmarks.support.environment import REPO_ROOT
from training.decisions.report import (
    KINDS,
    PolicyFigures,
    decision_report,
    format_comparisons,
    format_figures,
    read_runs,
    throughput_comparisons,
)

NAME = "decisions"
CAPTURE = REPO_ROOT / "training" / "data" / "decisions"
HELD_OUT = CAPTURE / "held-out"
#: The same regular held-out scenarios with perfSONAR's throughput tests (docs/decisions.md 7).
THROUGHPUT_HELD_OUT = CAPTURE / "tput" / "held-out"
ORACLE_RATIO_TARGET = 1.25
STATIC_GAIN_TARGET = 0.5
RUCIO_WITHIN = 0.10
METHOD = (
    "Reads the committed decision captures (`training/data/decisions/held-out/runs.jsonl`, "
    "written by `nettel simulate --family C --decisions DIR --seed 2`; docs/decisions.md): "
    "every policy's closed-loop ns-3 run of every held-out scenario, and the oracle's "
    "re-simulations of sampled requests. Reported per scenario kind: each policy's mean, median "
    "and p90 transfer time, its mean over the oracle's on the sampled requests, and its gain over "
    "the static policy (`nettel evaluate --decisions DIR` prints the same tables). Without "
    "--quick, one policy run of one held-out scenario is simulated again and must give the "
    "committed transfer times exactly (the capture is reproducible). With throughput tests "
    "(`training/data/decisions/tput/held-out/runs.jsonl`, the regular held-out scenarios with "
    "`--throughput-tests`): the same tables, and each policy against the served cost on the same "
    "requests (mean, one-sided paired Wilcoxon p, scenarios with a lower mean), including the "
    "served cost with tests against its runs without them; without --quick the served_tput run "
    "of the smallest scenario is re-simulated too."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    if not (HELD_OUT / "runs.jsonl").is_file():
        raise Unavailable(f"no decision capture at {HELD_OUT}")
    report = decision_report([HELD_OUT])
    result = MeasurementResult(NAME, "Decisions: which path gets the file across faster", METHOD)
    for kind, figures in report.items():
        result.notes.append(format_figures(figures, f"Held-out {kind} scenarios"))
        if kind in KINDS:
            _add(result, kind, figures)
    if (THROUGHPUT_HELD_OUT / "runs.jsonl").is_file():
        _add_throughput(result)
    if not ctx.quick:
        first_served = next(x for x in read_runs(HELD_OUT) if x["policy"] == "served")
        result.add(
            "reproduced_transfers",
            "transfers re-simulated with identical times",
            _reproduce(ctx, first_served),
        )
        if (THROUGHPUT_HELD_OUT / "runs.jsonl").is_file():
            runs = [x for x in read_runs(THROUGHPUT_HELD_OUT) if x["policy"] == "served_tput"]
            smallest = min(runs, key=lambda x: len(x["outcomes"]))
            result.add(
                "reproduced_throughput_transfers",
                "transfers re-simulated with identical times, with throughput tests",
                _reproduce(ctx, smallest),
            )
    return result


def _add_throughput(result: MeasurementResult) -> None:
    """Served against served with the latest throughput, on the runs with throughput tests."""
    lines = read_runs(THROUGHPUT_HELD_OUT)
    for kind, figures in decision_report([THROUGHPUT_HELD_OUT]).items():
        result.notes.append(format_figures(figures, f"Held-out {kind} scenarios, with tests"))
    comparisons = throughput_comparisons(lines, "regular", read_runs(HELD_OUT))
    result.notes.append(format_comparisons(comparisons, "With tests: against served, paired"))
    for c in comparisons:
        key = c.label if c.baseline == "served" else "served_with_tests"
        result.add(f"tput_{key}_mean_s", f"with tests: {c.label} mean", c.mean_s, "s")
        result.add(
            f"tput_{key}_change", f"with tests: {c.label} mean / {c.baseline} mean - 1", c.change
        )
        result.add(f"tput_{key}_p", f"with tests: {c.label} < {c.baseline}, paired p", c.p_lower)


def _add(result: MeasurementResult, kind: str, figures: list[PolicyFigures]) -> None:
    by = {f.policy: f for f in figures}
    served = by["served"]
    for f in figures:
        result.add(f"{kind}_{f.policy}_mean_s", f"{kind}: {f.policy} mean", f.mean_s, "s")
    if kind == "herding":
        result.target(
            "herding_served_over_random",
            "herding: served mean / random mean",
            served.mean_s / by["random"].mean_s,
            "<=",
            1.0,
        )
        return
    result.target(
        "served_oracle_ratio", "served mean / oracle mean", served.oracle_ratio, "<=",
        ORACLE_RATIO_TARGET,
    )  # fmt: skip
    result.target(
        "served_mean_gain", "served mean gain over static", served.mean_gain_over_static, ">=",
        STATIC_GAIN_TARGET,
    )  # fmt: skip
    result.target(
        "served_p90_gain", "served p90 gain over static", served.p90_gain_over_static, ">=",
        STATIC_GAIN_TARGET,
    )  # fmt: skip
    result.target(
        "served_over_no_model",
        "served mean / no-model mean",
        served.mean_s / by["no_model"].mean_s,
        "<=",
        1.0,
    )
    if "rucio" in by and "served_stale" in by:
        result.target(
            "rucio_over_stale_served",
            "through-Rucio mean / served-cost mean at the same staleness",
            by["rucio"].mean_s / by["served_stale"].mean_s,
            "<=",
            1.0 + RUCIO_WITHIN,
        )


def _reproduce(ctx: SuiteContext, line: dict[str, Any]) -> int:
    """Re-run a committed policy run; the number of transfers, all equal (else raise)."""
    from service.analysis.features import FEATURE_NAMES
    from service.config import DEFAULT_BUNDLE
    from service.model.bundle import load_bundle
    from simulation.decision_world import draw_scenario
    from training.dataset import DEFAULT_START_MINUTE
    from training.decisions.run import run_policy

    key = line["scenario"]
    ctx.log(f"decisions: re-simulating {line['job']}")
    tests = key.get("throughput_tests", False)
    scenario = draw_scenario(key["seed"], key["index"], key["herding"], tests)
    predictor = load_bundle(DEFAULT_BUNDLE, FEATURE_NAMES)
    outcomes = run_policy(scenario, line["policy"], predictor, DEFAULT_START_MINUTE)
    again = [(o.request, o.path, o.duration_s) for o in outcomes]
    committed = [(o["request"], o["path"], o["duration_s"]) for o in line["outcomes"]]
    if again != committed:
        raise AssertionError(
            f"{line['job']} re-simulated differs: {json.dumps(again[:3])} vs "
            f"{json.dumps(committed[:3])} ..."
        )
    return len(again)
