"""`nettel evaluate --decisions DIR`: transfer times by policy, against the oracle and static.

Reads DIR/runs.jsonl (`training.decisions.simulate`). Per policy, over every request of the
scenarios of one kind (regular, herding): mean, median and p90 transfer time; the ratio of its
mean to the oracle's on the requests whose oracle was re-simulated (the same requests, so the
ratio is >= 1 for every policy that could have picked the oracle's path); and the gain of the
mean and p90 over the static policy. A transfer still running at the scenario's end counts with
its time so far (a lower bound), and the censored count is reported.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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
