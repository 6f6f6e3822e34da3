"""The latest throughput as a decision input: the view, the policies' scores and the rule's fit."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service.cli import main
from simulation.decision_world import ThroughputTests
from training.decisions.policies import POLICIES, served_with_throughput
from training.decisions.rucio_mirror import RucioMirror
from training.decisions.served_view import CandidateView, ViewHistory
from training.decisions.throughput import (
    FITTED_THROUGHPUT_SHAPE,
    ThroughputRows,
    ThroughputShape,
    choose_throughput_shape,
    latest_throughput,
    reference_throughput,
    served_tput_score,
    throughput_rows,
    throughput_term,
)


def test_the_view_holds_each_paths_newest_result_once_archived() -> None:
    # path 0: tests at 0 s and 300 s; path 1: one at 100 s that failed (NaN); path 2: one whose
    # result is archived 5 s after its end, at 625 s
    tests = ThroughputTests(np.array([0, 1, 0, 2]), np.array([0.0, 100.0, 300.0, 600.0]), 20.0)
    measured = np.array([1.5e6, np.nan, 0.9e6, 2.2e6])
    bps, start = latest_throughput(tests, measured, 3, 624.0)
    assert bps[0] == 0.9e6 and np.isnan(bps[1]) and np.isnan(bps[2])
    assert start[0] == 300.0 and np.isnan(start[1]) and np.isnan(start[2])
    bps, start = latest_throughput(tests, measured, 3, 625.0)
    assert bps[2] == 2.2e6 and start[2] == 600.0
    bps, _ = latest_throughput(tests, measured, 3, 100.0)
    assert bps[0] == 1.5e6  # before the second test of path 0 is archived


def test_the_aged_term_fades_to_no_result_and_each_form_has_its_value() -> None:
    log = ThroughputShape("log", 600.0, 2e6)
    ratio = ThroughputShape("ratio", math.inf, 2e6)
    bps = np.array([1e6, 1e6, 4e6, np.nan])
    age = np.array([0.0, 600.0, 0.0, 0.0])
    assert throughput_term(log, bps, age) == pytest.approx(
        [math.log(2), math.log(2) / math.e, -math.log(2), 0.0]
    )
    assert throughput_term(ratio, bps, age) == pytest.approx([1.0, 1.0, -0.5, 0.0])
    assert throughput_term(log, bps, np.full(4, 1e9)) == pytest.approx([0.0] * 4)


def test_the_score_adds_the_weighted_term_to_the_weighted_hazard() -> None:
    shape = ThroughputShape("ratio", math.inf, 2e6, cost_weight=2.0, throughput_weight=0.25)
    cost = np.array([0.5, 0.2, np.nan])
    score = served_tput_score(shape, cost, np.array([1e6, np.nan, 1e6]), np.zeros(3))
    # 2 (-log 0.5) + 0.25 (2 - 1); 2 (-log 0.8) + 0; no cost: NaN (ranked last, as served)
    assert score[:2] == pytest.approx([2 * math.log(2) + 0.25, -2 * math.log(0.8)])
    assert np.isnan(score[2])


def plain_view(k: int, **throughput: np.ndarray) -> CandidateView:
    """A view of k paths at cost 0.3 published at 62 s (other values unknown)."""
    nan = np.full(k, np.nan)
    return CandidateView(
        published_s=62.0, cost=np.full(k, 0.3), no_model_cost=nan, utilisation=nan,
        congestion_probability=nan, loss=nan, excess_delay_ms=nan, min_delay_ms=np.zeros(k),
        **throughput,
    )  # fmt: skip


def view_with_throughput(bps: list[float], start_s: list[float]) -> CandidateView:
    return plain_view(len(bps), throughput_bps=np.array(bps), throughput_start_s=np.array(start_s))


def test_tput_only_picks_the_highest_latest_result_and_ranks_paths_without_one_last() -> None:
    history = ViewHistory([view_with_throughput([1e6, np.nan, 2.5e6, 2e6], [0, np.nan, 0, 60])])
    choose = POLICIES["tput_only"]
    mirror, rng = RucioMirror(4, 60.0, 0.0, 0.0), np.random.default_rng(0)
    assert choose(100.0, history, mirror, rng).path == 2  # whatever its age
    history = ViewHistory([view_with_throughput([np.nan, np.nan], [np.nan, np.nan])])
    assert {choose(100.0, history, mirror, rng).path for _ in range(30)} == {0, 1}


def test_a_throughput_policy_without_tests_says_what_is_missing() -> None:
    history = ViewHistory([plain_view(2)])
    with pytest.raises(ValueError, match="--throughput-tests"):
        POLICIES["tput_only"](
            100.0, history, RucioMirror(2, 60.0, 0.0, 0.0), np.random.default_rng(0)
        )


def synthetic_rows(throughput_matters: bool, n: int = 800) -> ThroughputRows:
    """Rows of five scenarios whose log time per byte is 0.8 h (+ 0.5 exp(-age / 900 s)
    log(2 Mb/s / T) when the throughput matters), a quarter of them without a result."""
    rng = np.random.default_rng(3)
    hazard = rng.exponential(0.5, n)
    bps = rng.uniform(0.3e6, 3e6, n)
    bps[rng.random(n) < 0.25] = np.nan
    age = rng.uniform(0.0, 3000.0, n)
    term = np.where(
        np.isnan(bps), 0.0, np.exp(-age / 900.0) * np.log(2e6 / np.nan_to_num(bps, nan=1.0))
    )
    y = -12.0 + 0.8 * hazard + (0.5 * term if throughput_matters else 0.0) + rng.normal(0, 0.05, n)
    return ThroughputRows(hazard, bps, age, y, np.repeat(np.arange(5).astype(str), n // 5))


def test_the_rule_finds_the_form_decay_and_weights_that_made_the_outcomes() -> None:
    report = choose_throughput_shape(synthetic_rows(True), 2e6)
    chosen = report.chosen
    assert (chosen.form, chosen.decay_s) == ("log", 900.0)
    assert chosen.cost_weight == pytest.approx(0.8, abs=0.02)
    assert chosen.throughput_weight == pytest.approx(0.5, abs=0.02)
    assert report.intercept == pytest.approx(-12.0, abs=0.02)
    assert report.helps_on_training and report.chosen_mse < report.served_only_mse
    assert report.rows == 800 and report.scenarios == 5 and len(report.candidates) == 8


def test_the_rule_finds_no_help_where_the_throughput_tells_nothing() -> None:
    report = choose_throughput_shape(synthetic_rows(False), 2e6)
    assert not report.helps_on_training
    assert report.chosen_mse >= report.served_only_mse or report.chosen.throughput_weight == 0


def test_the_rule_needs_two_scenarios_to_leave_one_out() -> None:
    rows = synthetic_rows(True)
    one = ThroughputRows(rows.hazard, rows.throughput_bps, rows.age_s, rows.y, np.full(800, "a"))
    with pytest.raises(ValueError, match="two scenarios"):
        choose_throughput_shape(one, 2e6)


def test_rows_carry_the_chosen_paths_result_and_its_age_at_the_request() -> None:
    view = {"cost": [0.5, None], "throughput_bps": [1e6, None], "throughput_start_s": [40.0, None]}
    outcome = {"arrival_s": 100.0, "size_bytes": 1e6, "duration_s": 2.0, "view": view}
    lines: list[dict[str, Any]] = [
        {"job": "s-1/served", "policy": "served", "outcomes": [outcome | {"path": 0},
                                                               outcome | {"path": 1}],
         "throughput_tests": [[0, 40.0, 1000000], [1, 90.0, None], [1, 200.0, 3000000]]},
        {"job": "s-1/oracle/0/0", "policy": "oracle", "request": 0, "path": 0, "duration_s": 1.0},
    ]  # fmt: skip
    rows = throughput_rows(lines)
    assert rows.hazard == pytest.approx([math.log(2), 0.0])
    assert rows.age_s[0] == 60.0 and np.isnan(rows.age_s[1])
    assert rows.throughput_bps[0] == 1e6 and np.isnan(rows.throughput_bps[1])
    assert rows.y == pytest.approx([math.log(2e-6)] * 2)
    assert reference_throughput(lines) == 2e6  # the median of 1 and 3 Mb/s (one test failed)


def test_served_tput_adds_the_fitted_aged_term_and_a_fresh_low_result_turns_it_away() -> None:
    shape = FITTED_THROUGHPUT_SHAPE
    assert (shape.form, shape.decay_s, shape.reference_bps) == ("ratio", 300.0, 742_534.0)
    assert (shape.cost_weight, shape.throughput_weight) == (1.0514, 0.9084)
    # path 0: cost 0.3, a 0.5 Mb/s result started at 0 s; path 1: cost 0.4, no result yet
    view = view_with_throughput([5e5, np.nan], [0.0, np.nan])
    view = replace(view, cost=np.array([0.3, 0.4]))
    fresh = served_with_throughput(view, 100.0)
    term = 0.9084 * (742_534.0 / 5e5 - 1) * math.exp(-100 / 300)
    assert fresh == pytest.approx([1.0514 * -math.log(0.7) + term, 1.0514 * -math.log(0.6)])
    assert fresh.round(4).tolist() == [0.6907, 0.5371]
    history = ViewHistory([view])
    mirror, rng = RucioMirror(2, 60.0, 0.0, 0.0), np.random.default_rng(0)
    choose, served = POLICIES["served_tput"], POLICIES["served"]
    assert choose(100.0, history, mirror, rng).path == 1  # the fresh low result outweighs 0.1
    assert choose(3000.0, history, mirror, rng).path == 0  # aged 10 tau: the cost decides
    assert served(100.0, history, mirror, rng).path == 0


def test_the_fitted_constants_are_the_rules_choice_on_the_committed_training_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    train = Path(__file__).parents[2] / "training" / "data" / "decisions" / "tput" / "train"
    assert main(["evaluate", "--decisions", str(train), "--fit-throughput"]) == 0
    out = capsys.readouterr().out
    assert "chosen 0.6578, served cost alone 0.6212" in out
    assert "chosen: 1.0514 h + 0.9084 exp(-age / 300 s) (T_ref / T - 1), T_ref = 0.7425" in out
    assert "condition 1 (training): fails" in out
    assert FITTED_THROUGHPUT_SHAPE.reference_bps == 742_534.0


def test_simulate_refuses_a_throughput_policy_without_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["simulate", "--family", "C", "--decisions", str(tmp_path), "--scenarios", "1",
            "--herding-scenarios", "0", "--policies", "served,served_tput"]  # fmt: skip
    assert main(args) == 2
    assert "--policies ['served_tput'] need --throughput-tests" in capsys.readouterr().err
    assert not (tmp_path / "runs.jsonl").exists()
