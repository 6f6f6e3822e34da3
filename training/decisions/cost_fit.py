"""Fitting the cost's shape to transfer outcomes (docs/decisions.md section 4, the rule).

Each completed transfer of the training runs is a row: the served utilisation estimate U,
congestion probability P, loss l and delay above the minimum d of the path it took, when it was
chosen, and y = log(duration / size). A shape names one transform per input; its weights are
fitted by non-negative least squares, y = b + sum_i w_i f_i(x_i), so the hazard
h = sum_i w_i f_i(x_i) is non-decreasing in each input and the cost 1 - exp(-h) is monotone.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
from scipy.optimize import nnls  # type: ignore[import-untyped]

from service.analysis.cost import CostShape, Form, hazard_terms


@dataclass(frozen=True)
class OutcomeRows:
    """Completed transfers: the chosen path's served inputs, the target and the scenario."""

    utilisation: np.ndarray
    probability: np.ndarray
    loss: np.ndarray
    excess_delay_ms: np.ndarray
    base_delay_ms: np.ndarray
    hand_set_cost: np.ndarray
    y: np.ndarray
    scenario: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def select(self, mask: np.ndarray) -> OutcomeRows:
        return OutcomeRows(*(getattr(self, name)[mask] for name in self.__dataclass_fields__))


def outcome_rows(lines: list[dict[str, Any]]) -> OutcomeRows:
    """The completed transfers of every policy run in `lines` (oracle probes excluded)."""
    columns: dict[str, list[Any]] = {name: [] for name in OutcomeRows.__dataclass_fields__}
    for line in lines:
        if line["policy"] == "oracle":
            continue
        scenario = line["job"].split("/")[0]
        for outcome in line["outcomes"]:
            view = outcome["view"]
            if outcome["duration_s"] is None or view is None:
                continue
            path = outcome["path"]
            columns["utilisation"].append(_value(view["utilisation"][path]))
            columns["probability"].append(_value(view["congestion_probability"][path]))
            columns["loss"].append(_value(view["loss"][path]))
            columns["excess_delay_ms"].append(_value(view["excess_delay_ms"][path]))
            columns["base_delay_ms"].append(_value(view["min_delay_ms"][path]))
            columns["hand_set_cost"].append(_value(view["cost"][path]))
            columns["y"].append(math.log(outcome["duration_s"] / outcome["size_bytes"]))
            columns["scenario"].append(scenario)
    return OutcomeRows(**{name: np.array(values) for name, values in columns.items()})


def _value(value: float | None) -> float:
    return 0.0 if value is None else float(value)


def candidate_shapes() -> list[CostShape]:
    """The 72 shapes of the rule (as amended), with unit weights (fitting sets them)."""
    forms: tuple[Form, Form] = ("linear", "log")
    base_forms: tuple[Form | Literal["none"], ...] = ("none", "linear", "log")
    return [
        CostShape(power, loss, delay, base, 1.0, 1.0, 1.0, 1.0 if probability else 0.0, 1.0)
        for power, loss, delay, probability, base in itertools.product(
            (1, 2, 4), forms, forms, (True, False), base_forms,
        )
    ]  # fmt: skip


def design(shape: CostShape, rows: OutcomeRows) -> np.ndarray:
    """The rows' transformed inputs (rows x 5; the P column zero when the shape has none)."""
    terms = hazard_terms(
        shape, rows.utilisation, rows.loss, rows.excess_delay_ms, rows.probability,
        rows.base_delay_ms,
    )  # fmt: skip
    columns = np.column_stack(terms)
    if shape.probability_weight == 0.0:
        columns[:, 3] = 0.0
    return columns


def fit_weights(columns: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Non-negative weights and a free intercept minimising the squared error of y."""
    ones = np.ones((len(y), 1))
    solution, _ = nnls(np.hstack([columns, ones, -ones]), y)
    return solution[:-2], float(solution[-2] - solution[-1])


def fitted_shape(shape: CostShape, rows: OutcomeRows) -> tuple[CostShape, float]:
    """`shape` with weights fitted on `rows`, and the intercept."""
    weights, intercept = fit_weights(design(shape, rows), rows.y)
    w = [float(x) for x in weights]
    forms = (shape.utilisation_power, shape.loss_form, shape.delay_form, shape.base_delay_form)
    return CostShape(*forms, *w), intercept


class ScenarioTargets(Protocol):
    """Rows with a target y and the scenario each came from."""

    @property
    def y(self) -> np.ndarray: ...

    @property
    def scenario(self) -> np.ndarray: ...


def leave_one_scenario_out_mse(columns: np.ndarray, rows: ScenarioTargets) -> float:
    """Mean squared error of y, each scenario's rows predicted by a fit on the others."""
    errors = []
    for scenario in np.unique(rows.scenario):
        held = rows.scenario == scenario
        weights, intercept = fit_weights(columns[~held], rows.y[~held])
        errors.append((rows.y[held] - intercept - columns[held] @ weights) ** 2)
    return float(np.concatenate(errors).mean())


def hand_set_columns(rows: OutcomeRows) -> np.ndarray:
    """The hand-set cost as a predictor: one column -log(1 - cost)."""
    return -np.log(np.clip(1.0 - rows.hand_set_cost, 1e-4, 1.0))[:, None]


@dataclass(frozen=True)
class FitReport:
    chosen: CostShape
    intercept: float
    chosen_mse: float
    hand_set_mse: float
    intercept_only_mse: float
    candidates: list[tuple[CostShape, float]]
    rows: int
    scenarios: int

    @property
    def ship(self) -> bool:
        """The rule's ship condition: the fitted cost predicts better than the hand-set one."""
        return self.chosen_mse < self.hand_set_mse


def choose_shape(rows: OutcomeRows) -> FitReport:
    """Apply the rule: every candidate's leave-one-scenario-out error; the best, refitted."""
    scored = [(shape, leave_one_scenario_out_mse(design(shape, rows), rows)) for shape in
              candidate_shapes()]  # fmt: skip
    best, best_mse = min(scored, key=lambda item: item[1])
    chosen, intercept = fitted_shape(best, rows)
    return FitReport(
        chosen=chosen,
        intercept=intercept,
        chosen_mse=best_mse,
        hand_set_mse=leave_one_scenario_out_mse(hand_set_columns(rows), rows),
        intercept_only_mse=leave_one_scenario_out_mse(np.zeros((len(rows), 0)), rows),
        candidates=scored,
        rows=len(rows),
        scenarios=len(np.unique(rows.scenario)),
    )


def format_fit(report: FitReport) -> str:
    """The rule's figures as Markdown: the chosen shape first, then every candidate."""
    c = report.chosen
    lines = [
        f"{report.rows} transfers of {report.scenarios} scenarios; leave-one-scenario-out MSE "
        f"of log(duration / size): chosen {report.chosen_mse:.4f}, hand-set cost "
        f"{report.hand_set_mse:.4f}, intercept only {report.intercept_only_mse:.4f}",
        f"chosen: U^{c.utilisation_power} x {c.utilisation_weight:.4f} + {c.loss_form} loss x "
        f"{c.loss_weight:.4f} + {c.delay_form} delay x {c.delay_weight:.4f} + P x "
        f"{c.probability_weight:.4f} + {c.base_delay_form} base delay x "
        f"{c.base_delay_weight:.4f} (intercept {report.intercept:.4f})",
        f"ship: {'yes' if report.ship else 'no'} (fitted error below the hand-set cost's)",
        "",
        "| U power | loss | delay | P | base delay | LOSO MSE |",
        "|---|---|---|---|---|---|",
    ]
    for shape, mse in sorted(report.candidates, key=lambda item: item[1]):
        lines.append(
            f"| {shape.utilisation_power} | {shape.loss_form} | {shape.delay_form} "
            f"| {'yes' if shape.probability_weight else 'no'} | {shape.base_delay_form} "
            f"| {mse:.4f} |"
        )
    return "\n".join(lines)
