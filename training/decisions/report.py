"""`nettel evaluate --decisions DIR`: transfer times by policy, against the oracle and static.

Reads DIR/runs.jsonl (`training.decisions.simulate`). Per policy, over every request of the
scenarios of one kind (regular, herding): mean, median and p90 transfer time; the ratio of its
mean to the oracle's on the requests whose oracle was re-simulated (the same requests, so the
ratio is >= 1 for every policy that could have picked the oracle's path); and the gain of the
mean and p90 over the static policy. A transfer still running at the scenario's end counts with
its time so far (a lower bound), and the censored count is reported. `paired_comparison` sets
two runs of the same requests side by side (one policy against another, or one policy with and
without throughput tests): the change of the mean, a one-sided paired Wilcoxon signed-rank test
and the scenarios whose mean is lower.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import wilcoxon  # type: ignore[import-untyped]

from training.decisions.policies import DESCRIPTIONS
from training.decisions.simulate import RUNS_FILE

KINDS = ("regular", "herding")
#: Regular scenarios split by whether two candidates share a congested segment.
SEGMENT_KINDS = ("regular, shared segment", "regular, independent paths")


@dataclass(frozen=True)
class PolicyFigures:
    policy: str
    transfers: int
    censored: int
    mean_s: float
    median_s: float
    p90_s: float
    sampled_mean_s: float | None
    oracle_ratio: float | None
    mean_gain_over_static: float | None
    p90_gain_over_static: float | None


def read_runs(directory: Path) -> list[dict[str, Any]]:
    path = directory / RUNS_FILE
    if not path.is_file():
        raise ValueError(f"{path} does not exist: run `nettel simulate --family C --decisions`")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def scenario_end_s(line: dict[str, Any]) -> float:
    return 60.0 * float(line["summary"]["minutes"])


def durations(line: dict[str, Any]) -> tuple[dict[tuple[str, int], float], int]:
    """(scenario, request) -> transfer time (censored: time until the end), censored count."""
    scenario = line["job"].rsplit("/", 1)[0]
    end = scenario_end_s(line)
    times, censored = {}, 0
    for outcome in line["outcomes"]:
        duration = outcome["duration_s"]
        if duration is None:
            duration, censored = end - outcome["arrival_s"], censored + 1
        times[(scenario, outcome["request"])] = float(duration)
    return times, censored


def oracle_times(lines: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """(scenario, request) -> the fastest candidate's transfer time in hindsight."""
    probes: dict[tuple[str, int], list[float]] = defaultdict(list)
    for line in lines:
        if line["policy"] == "oracle":
            scenario = line["job"].split("/")[0]
            duration = line["duration_s"]
            probes[(scenario, line["request"])].append(math.inf if duration is None else duration)
    return {key: min(values) for key, values in probes.items() if math.isfinite(min(values))}


def scenario_kind(line: dict[str, Any], shared: set[str]) -> str:
    """regular or herding; `shared`: the names of the scenarios with a shared segment."""
    return "herding" if line["scenario"]["herding"] else "regular"


def segment_kind(line: dict[str, Any], shared: set[str]) -> str:
    """Which of SEGMENT_KINDS a regular scenario's line is (herding: "")."""
    if line["scenario"]["herding"]:
        return ""
    return SEGMENT_KINDS[0] if line["job"].split("/")[0] in shared else SEGMENT_KINDS[1]


def shared_scenarios(lines: list[dict[str, Any]]) -> set[str]:
    """Names of the scenarios whose summary has a shared segment."""
    return {
        line["job"].split("/")[0]
        for line in lines
        if "summary" in line and line["summary"]["shared_paths"] is not None
    }


def policy_figures(lines: list[dict[str, Any]], kind: str) -> list[PolicyFigures]:
    """Every policy's figures over the scenarios of `kind` (KINDS or SEGMENT_KINDS)."""
    shared = shared_scenarios(lines)
    classify = segment_kind if kind in SEGMENT_KINDS else scenario_kind
    chosen = [line for line in lines if classify(line, shared) == kind]
    oracle = oracle_times(chosen)
    by_policy: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
    censored: dict[str, int] = defaultdict(int)
    for line in chosen:
        if line["policy"] != "oracle":
            times, cut = durations(line)
            by_policy[line["policy"]].update(times)
            censored[line["policy"]] += cut
    static = by_policy.get("static")
    figures = [
        _figures(policy, times, censored[policy], oracle, static)
        for policy, times in sorted(by_policy.items(), key=lambda item: _order(item[0]))
    ]
    if oracle:
        values = np.array(list(oracle.values()))
        figures.append(
            PolicyFigures(
                "oracle", len(values), 0, float(values.mean()), float(np.median(values)),
                float(np.percentile(values, 90)), float(values.mean()), 1.0, None, None,
            )
        )  # fmt: skip
    return figures


def _order(policy: str) -> int:
    names = list(DESCRIPTIONS)
    return names.index(policy) if policy in names else len(names)


def _figures(
    policy: str,
    times: dict[tuple[str, int], float],
    censored: int,
    oracle: dict[tuple[str, int], float],
    static: dict[tuple[str, int], float] | None,
) -> PolicyFigures:
    values = np.array(list(times.values()))
    sampled = [key for key in oracle if key in times]
    sampled_mean = float(np.mean([times[k] for k in sampled])) if sampled else None
    ratio = None
    if sampled:
        ratio = sampled_mean / float(np.mean([oracle[k] for k in sampled]))  # type: ignore[operator]
    gains: tuple[float | None, float | None] = (None, None)
    if static:
        shared = [key for key in times if key in static]
        mine = np.array([times[k] for k in shared])
        theirs = np.array([static[k] for k in shared])
        gains = (
            1 - mine.mean() / theirs.mean(),
            1 - np.percentile(mine, 90) / np.percentile(theirs, 90),
        )
    return PolicyFigures(
        policy=policy,
        transfers=len(values),
        censored=censored,
        mean_s=float(values.mean()),
        median_s=float(np.median(values)),
        p90_s=float(np.percentile(values, 90)),
        sampled_mean_s=sampled_mean,
        oracle_ratio=ratio,
        mean_gain_over_static=None if gains[0] is None else float(gains[0]),
        p90_gain_over_static=None if gains[1] is None else float(gains[1]),
    )


def format_figures(figures: list[PolicyFigures], title: str) -> str:
    """A Markdown table of `figures`."""
    rows = [
        f"{title}",
        "",
        "| policy | transfers | mean s | median s | p90 s | vs oracle | mean gain over static "
        "| p90 gain over static |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in figures:
        rows.append(
            f"| {f.policy} | {f.transfers}{f' ({f.censored} cut)' if f.censored else ''} "
            f"| {f.mean_s:.2f} | {f.median_s:.2f} | {f.p90_s:.2f} | {_ratio(f.oracle_ratio)} "
            f"| {_percent(f.mean_gain_over_static)} | {_percent(f.p90_gain_over_static)} |"
        )
    return "\n".join(rows)


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:+.0f} %"


def decision_report(directories: list[Path]) -> dict[str, list[PolicyFigures]]:
    """Figures per scenario kind present in the runs of `directories` (regular scenarios also
    split by shared segment)."""
    lines = [line for directory in directories for line in read_runs(directory)]
    shared = shared_scenarios(lines)
    kinds = {scenario_kind(line, shared) for line in lines}
    kinds |= {segment_kind(line, shared) for line in lines}
    return {kind: policy_figures(lines, kind) for kind in KINDS + SEGMENT_KINDS if kind in kinds}


RequestTimes = dict[tuple[str, int], float]


def request_times(lines: list[dict[str, Any]], policy: str, kind: str) -> RequestTimes:
    """(scenario, request) -> `policy`'s transfer time over the scenarios of `kind`."""
    shared = shared_scenarios(lines)
    classify = segment_kind if kind in SEGMENT_KINDS else scenario_kind
    times: RequestTimes = {}
    for line in lines:
        if line["policy"] == policy and classify(line, shared) == kind:
            times |= durations(line)[0]
    return times


@dataclass(frozen=True)
class PairedComparison:
    """`label`'s transfer times against `baseline`'s on the requests both ran."""

    label: str
    baseline: str
    requests: int
    mean_s: float
    baseline_mean_s: float
    #: One-sided paired Wilcoxon signed-rank p-value that `label`'s times are lower (pairs with
    #: equal times dropped); None with fewer than two unequal pairs.
    p_lower: float | None
    scenarios_lower: int
    scenarios: int

    @property
    def change(self) -> float:
        """The mean's relative change against the baseline (negative: faster)."""
        return self.mean_s / self.baseline_mean_s - 1.0


def paired_comparison(
    times: RequestTimes, baseline_times: RequestTimes, label: str, baseline: str
) -> PairedComparison:
    """Compare two policies' (or runs') times on the requests both have."""
    keys = sorted(set(times) & set(baseline_times))
    if not keys:
        raise ValueError(f"{label} and {baseline} ran no request in common")
    mine = np.array([times[k] for k in keys])
    theirs = np.array([baseline_times[k] for k in keys])
    unequal = mine != theirs
    p_lower = None
    if unequal.sum() >= 2:
        p_lower = float(wilcoxon(mine[unequal], theirs[unequal], alternative="less").pvalue)
    scenario = np.array([k[0] for k in keys])
    names = np.unique(scenario)
    lower = sum(mine[scenario == name].mean() < theirs[scenario == name].mean() for name in names)
    return PairedComparison(
        label, baseline, len(keys), float(mine.mean()), float(theirs.mean()), p_lower,
        int(lower), len(names),
    )  # fmt: skip


def format_comparisons(comparisons: list[PairedComparison], title: str) -> str:
    """A Markdown table of paired comparisons."""
    rows = [
        title,
        "",
        "| policy | against | requests | mean s | against mean s | change of the mean "
        "| paired p (lower) | scenarios lower |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        p = "" if c.p_lower is None else f"{c.p_lower:.3g}"
        rows.append(
            f"| {c.label} | {c.baseline} | {c.requests} | {c.mean_s:.2f} "
            f"| {c.baseline_mean_s:.2f} | {100 * c.change:+.1f} % | {p} "
            f"| {c.scenarios_lower} of {c.scenarios} |"
        )
    return "\n".join(rows)


#: Policies set against the served cost when the runs have throughput tests.
THROUGHPUT_COMPARED = ("served_tput", "tput_only", "static")
WITHOUT_TESTS = "without tests"


def throughput_comparisons(
    lines: list[dict[str, Any]],
    kind: str,
    without_tests: list[dict[str, Any]] | None = None,
) -> list[PairedComparison]:
    """In runs with throughput tests: each throughput policy (and static) against `served`, and
    with `without_tests` (the same scenarios' runs without tests) served against itself."""
    served = request_times(lines, "served", kind)
    comparisons = []
    for policy in THROUGHPUT_COMPARED:
        times = request_times(lines, policy, kind)
        if times and served:
            comparisons.append(paired_comparison(times, served, policy, "served"))
    if without_tests is not None:
        before = request_times(without_tests, "served", kind)
        if before and served:
            comparisons.append(
                paired_comparison(served, before, "served", f"served {WITHOUT_TESTS}")
            )
    return comparisons


def scenario_means(lines: list[dict[str, Any]], policies: tuple[str, ...], kind: str) -> str:
    """A Markdown table: each scenario's mean transfer time under each of `policies` that ran."""
    by_policy = {policy: request_times(lines, policy, kind) for policy in policies}
    by_policy = {policy: times for policy, times in by_policy.items() if times}
    policies = tuple(by_policy)
    names = sorted({key[0] for times in by_policy.values() for key in times})
    rows = [
        "| scenario | requests | " + " | ".join(f"{p} mean s" for p in policies) + " |",
        "|---|---|" + "---|" * len(policies),
    ]
    for name in names:
        cells = []
        for policy in policies:
            values = [t for (scenario, _), t in by_policy[policy].items() if scenario == name]
            cells.append(f"{np.mean(values):.2f}" if values else "")
        count = max(
            sum(1 for scenario, _ in times if scenario == name) for times in by_policy.values()
        )
        rows.append(f"| {name} | {count} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
