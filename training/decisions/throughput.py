"""The latest perfSONAR throughput result as a decision input (docs/decisions.md section 7).

`latest_throughput` is what a view serves of the tests: each path's newest archived result and
when its test started. `served_tput_score` combines it, aged, with the served cost:
`w_c h + w_t a(age) f(T)`, h = -log(1 - cost), a(age) = exp(-age / tau), f(T) = log(T_ref / T)
or T_ref / T - 1, 0 where a path has no result. `choose_throughput_shape` applies the rule: the
shape with the lowest leave-one-scenario-out error of log(duration / size) on the training
transfers, refitted on all of them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from simulation.decision_world import ThroughputTests
from training.decisions.cost_fit import fit_weights, leave_one_scenario_out_mse

#: Seconds from a test's end until its result is archived (then served from the next minute).
ARCHIVE_LAG_S = 5.0
#: Ages (s of scenario time) over which a result fades by 1/e; inf: it never does.
DECAYS_S = (300.0, 900.0, 2700.0, math.inf)
ThroughputForm = Literal["log", "ratio"]
FORMS: tuple[ThroughputForm, ...] = ("log", "ratio")
#: The smallest cost's complement the hazard reads (a cost of 1 would be an infinite hazard).
MIN_COMPLEMENT = 1e-4


def latest_throughput(
    tests: ThroughputTests, measured_bps: np.ndarray, paths: int, served_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per path, the newest result archived by `served_s` and its test's start (NaN: none).

    >>> tests = ThroughputTests(np.array([0, 1, 0]), np.array([10.0, 40.0, 100.0]), 20.0)
    >>> bps, start = latest_throughput(tests, np.array([1e6, 2e6, np.nan]), 3, 130.0)
    >>> bps.tolist(), start.tolist()
    ([1000000.0, 2000000.0, nan], [10.0, 40.0, nan])
    """
    archived = np.isfinite(measured_bps) & (tests.end_s + ARCHIVE_LAG_S <= served_s)
    bps, start = np.full(paths, np.nan), np.full(paths, np.nan)
    for test in np.flatnonzero(archived)[np.argsort(tests.start_s[archived], kind="stable")]:
        bps[tests.path[test]] = measured_bps[test]
        start[tests.path[test]] = tests.start_s[test]
    return bps, start


@dataclass(frozen=True)
class ThroughputShape:
    """One candidate of the rule, with its weights (unit weights before fitting)."""

    form: ThroughputForm
    decay_s: float
    reference_bps: float
    cost_weight: float = 1.0
    throughput_weight: float = 1.0

    def describe(self) -> str:
        f = "log(T_ref / T)" if self.form == "log" else "(T_ref / T - 1)"
        aging = "" if math.isinf(self.decay_s) else f" exp(-age / {self.decay_s:.0f} s)"
        return (
            f"{self.cost_weight:.4f} h + {self.throughput_weight:.4f}{aging} {f}, "
            f"T_ref = {self.reference_bps / 1e6:.4f} Mb/s"
        )


#: `served_tput`'s shape and weights: the rule's choice on the training runs with tests
#: (`nettel evaluate --decisions training/data/decisions/tput/train --fit-throughput`). Its
#: leave-one-scenario-out error (0.6578) is above the served cost's alone (0.6212): condition 1
#: of the rule fails, so the throughput is not a cost input; the policy is kept to report it.
FITTED_THROUGHPUT_SHAPE = ThroughputShape(
    form="ratio",
    decay_s=300.0,
    reference_bps=742_534.0,
    cost_weight=1.0514,
    throughput_weight=0.9084,
)


def cost_hazard(cost: np.ndarray) -> np.ndarray:
    """h = -log(1 - cost): the log factor the served cost predicts on a transfer's time."""
    return -np.log(np.clip(1.0 - cost, MIN_COMPLEMENT, 1.0))


def throughput_term(shape: ThroughputShape, bps: np.ndarray, age_s: np.ndarray) -> np.ndarray:
    """a(age) f(T), 0 where there is no result.

    >>> shape = ThroughputShape("log", 900.0, 2e6)
    >>> throughput_term(shape, np.array([1e6, 4e6, np.nan]), np.array([0.0, 900.0, 0.0])).round(4)
    array([ 0.6931, -0.255 ,  0.    ])
    """
    known = np.isfinite(bps) & (bps > 0)
    safe = np.where(known, bps, shape.reference_bps)
    ratio = shape.reference_bps / safe
    f = np.log(ratio) if shape.form == "log" else ratio - 1.0
    aging = np.ones_like(safe) if math.isinf(shape.decay_s) else np.exp(-age_s / shape.decay_s)
    return np.where(known, aging * f, 0.0)


def served_tput_score(
    shape: ThroughputShape, cost: np.ndarray, bps: np.ndarray, age_s: np.ndarray
) -> np.ndarray:
    """`served_tput`'s score (lowest wins; NaN where the cost is missing).

    >>> shape = ThroughputShape("log", math.inf, 2e6, cost_weight=1.0, throughput_weight=0.5)
    >>> cost = np.array([0.5, 0.2])
    >>> served_tput_score(shape, cost, np.array([4e6, 1e6]), np.zeros(2)).round(4)
    array([0.3466, 0.5697])
    """
    term = throughput_term(shape, bps, np.nan_to_num(age_s))
    return shape.cost_weight * cost_hazard(cost) + shape.throughput_weight * term


# --- the rule: fitting on the training runs ------------------------------------------------------


@dataclass(frozen=True)
class ThroughputRows:
    """Completed transfers: the chosen path's hazard, latest throughput and its age, the target
    y = log(duration / size) and the scenario."""

    hazard: np.ndarray
    throughput_bps: np.ndarray
    age_s: np.ndarray
    y: np.ndarray
    scenario: np.ndarray

    def __len__(self) -> int:
        return len(self.y)


def throughput_rows(lines: list[dict[str, Any]]) -> ThroughputRows:
    """The completed transfers of every policy run in `lines` that saw throughput results."""
    columns: dict[str, list[Any]] = {name: [] for name in ThroughputRows.__dataclass_fields__}
    for line in lines:
        if line["policy"] == "oracle":
            continue
        scenario = line["job"].split("/")[0]
        for outcome in line["outcomes"]:
            view, path = outcome["view"], outcome["path"]
            if outcome["duration_s"] is None or view is None or "throughput_bps" not in view:
                continue
            bps, start = view["throughput_bps"][path], view["throughput_start_s"][path]
            columns["hazard"].append(float(cost_hazard(np.array(view["cost"][path] or 0.0))))
            columns["throughput_bps"].append(math.nan if bps is None else bps)
            columns["age_s"].append(math.nan if start is None else outcome["arrival_s"] - start)
            columns["y"].append(math.log(outcome["duration_s"] / outcome["size_bytes"]))
            columns["scenario"].append(scenario)
    return ThroughputRows(**{name: np.array(values) for name, values in columns.items()})


def reference_throughput(lines: list[dict[str, Any]]) -> float:
    """T_ref: the median of every test result in the runs of `lines`."""
    results = [
        bps for line in lines for _, _, bps in line.get("throughput_tests", []) if bps is not None
    ]
    if not results:
        raise ValueError("no throughput test results in the runs: simulate --throughput-tests")
    return float(np.median(results))


def candidate_throughput_shapes(reference_bps: float) -> list[ThroughputShape]:
    """The rule's 8 shapes (two forms, four decays), unit weights."""
    return [
        ThroughputShape(form, decay, reference_bps)
        for form, decay in itertools.product(FORMS, DECAYS_S)
    ]


def throughput_design(shape: ThroughputShape, rows: ThroughputRows) -> np.ndarray:
    """The rows' columns: the hazard h and the aged throughput term a(age) f(T)."""
    term = throughput_term(shape, rows.throughput_bps, np.nan_to_num(rows.age_s))
    return np.column_stack([rows.hazard, term])


@dataclass(frozen=True)
class ThroughputFitReport:
    chosen: ThroughputShape
    intercept: float
    chosen_mse: float
    served_only_mse: float
    candidates: list[tuple[ThroughputShape, float]]
    rows: int
    with_result: int
    scenarios: int

    @property
    def helps_on_training(self) -> bool:
        """Condition 1 of the rule: below the served cost alone, with a throughput weight."""
        return self.chosen_mse < self.served_only_mse and self.chosen.throughput_weight > 0


def choose_throughput_shape(rows: ThroughputRows, reference_bps: float) -> ThroughputFitReport:
    """Apply the rule: every shape's leave-one-scenario-out error; the best one, refitted."""
    if len(np.unique(rows.scenario)) < 2:
        raise ValueError("the rule leaves one scenario out: it needs runs of two scenarios or more")
    scored = [
        (shape, leave_one_scenario_out_mse(throughput_design(shape, rows), rows))
        for shape in candidate_throughput_shapes(reference_bps)
    ]
    best, best_mse = min(scored, key=lambda item: item[1])
    weights, intercept = fit_weights(throughput_design(best, rows), rows.y)
    chosen = replace(best, cost_weight=float(weights[0]), throughput_weight=float(weights[1]))
    return ThroughputFitReport(
        chosen=chosen,
        intercept=intercept,
        chosen_mse=best_mse,
        served_only_mse=leave_one_scenario_out_mse(rows.hazard[:, None], rows),
        candidates=scored,
        rows=len(rows),
        with_result=int(np.isfinite(rows.throughput_bps).sum()),
        scenarios=len(np.unique(rows.scenario)),
    )


def format_throughput_fit(report: ThroughputFitReport) -> str:
    """The rule's figures as Markdown: the choice, condition 1, then every shape."""
    lines = [
        f"{report.rows} transfers of {report.scenarios} scenarios ({report.with_result} with a "
        f"throughput result); leave-one-scenario-out MSE of log(duration / size): chosen "
        f"{report.chosen_mse:.4f}, served cost alone {report.served_only_mse:.4f}",
        f"chosen: {report.chosen.describe()} (intercept {report.intercept:.4f})",
        f"condition 1 (training): {'holds' if report.helps_on_training else 'fails'}",
        "",
        "| f(T) | tau s | LOSO MSE |",
        "|---|---|---|",
    ]
    for shape, mse in sorted(report.candidates, key=lambda item: item[1]):
        lines.append(f"| {shape.form} | {shape.decay_s:g} | {mse:.4f} |")
    return "\n".join(lines)
