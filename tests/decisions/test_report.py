"""`nettel evaluate --decisions`: figures by policy from a runs file (tests/data/decisions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from training.decisions.report import (
    decision_report,
    paired_comparison,
    read_runs,
    request_times,
    throughput_comparisons,
)


def write_runs(directory: Path) -> Path:
    """Two policies over one regular scenario of 25 minutes, and the oracle of request 0."""

    def outcomes(durations: list[float | None]) -> list[dict[str, object]]:
        return [
            {"request": r, "arrival_s": 600.0 + r, "size_bytes": 1e6, "path": 0,
             "completion_s": None if d is None else 600.0 + r + d, "view": None,
             "duration_s": d}
            for r, d in enumerate(durations)
        ]  # fmt: skip

    scenario = {"seed": 2, "index": 0, "herding": False}
    summary = {"minutes": 25, "shared_paths": None}
    lines = [
        {"job": "scenario-2-000/static", "scenario": scenario, "policy": "static",
         "outcomes": outcomes([10.0, 20.0, 30.0, 40.0]), "summary": summary},
        {"job": "scenario-2-000/served", "scenario": scenario, "policy": "served",
         "outcomes": outcomes([4.0, 5.0, 6.0, None]), "summary": summary},
        {"job": "scenario-2-000/oracle/0/0", "scenario": scenario, "policy": "oracle",
         "request": 0, "path": 0, "duration_s": 3.0},
        {"job": "scenario-2-000/oracle/0/1", "scenario": scenario, "policy": "oracle",
         "request": 0, "path": 1, "duration_s": 2.0},
    ]  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "runs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return directory


def test_figures_count_censored_transfers_until_the_end_and_compare_on_the_same_requests(
    tmp_path: Path,
) -> None:
    figures = {f.policy: f for f in decision_report([write_runs(tmp_path)])["regular"]}
    served, static, oracle = figures["served"], figures["static"], figures["oracle"]
    # request 3 is still running at the end (1500 s): it counts 1500 - 603 = 897 s
    assert served.censored == 1
    assert served.mean_s == pytest.approx((4 + 5 + 6 + 897) / 4)
    assert static.mean_s == 25.0
    assert oracle.mean_s == 2.0  # the faster of the two re-simulated candidates
    assert served.oracle_ratio == pytest.approx(4.0 / 2.0)
    assert static.oracle_ratio == pytest.approx(10.0 / 2.0)
    assert served.mean_gain_over_static == pytest.approx(1 - 228.0 / 25.0)


def test_evaluate_decisions_prints_a_table_per_scenario_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", "--decisions", str(write_runs(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "regular scenarios" in out
    assert "| served | 4 (1 cut) | 228.00 |" in out
    assert "| oracle | 1 | 2.00 |" in out


def test_evaluate_decisions_names_a_missing_runs_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", "--decisions", str(tmp_path)]) == 2
    assert "runs.jsonl does not exist" in capsys.readouterr().err


def write_throughput_runs(directory: Path, served: list[float], tput: list[float]) -> Path:
    """served and served_tput over two scenarios of two requests each, with throughput tests."""

    def line(name: str, policy: str, times: list[float]) -> dict[str, object]:
        outcomes = [
            {"request": r, "arrival_s": 600.0, "size_bytes": 1e6, "path": 0,
             "completion_s": 600.0 + d, "view": None, "duration_s": d}
            for r, d in enumerate(times)
        ]  # fmt: skip
        return {
            "job": f"{name}/{policy}", "policy": policy, "outcomes": outcomes,
            "scenario": {"seed": 2, "index": 0, "herding": False, "throughput_tests": True},
            "summary": {"minutes": 25, "shared_paths": None}, "throughput_tests": [],
        }  # fmt: skip

    lines = [
        line(name, policy, times[2 * i : 2 * i + 2])
        for i, name in enumerate(("scenario-2-000", "scenario-2-001"))
        for policy, times in (("served", served), ("served_tput", tput))
    ]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "runs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return directory


def test_a_paired_comparison_sets_the_same_requests_side_by_side(tmp_path: Path) -> None:
    lines = read_runs(write_throughput_runs(tmp_path, [10.0, 20.0, 30.0, 40.0], [8, 20, 36, 20]))
    served = request_times(lines, "served", "regular")
    assert served[("scenario-2-001", 1)] == 40.0
    comparison = paired_comparison(request_times(lines, "served_tput", "regular"), served,
                                   "served_tput", "served")  # fmt: skip
    assert comparison.requests == 4
    assert (comparison.mean_s, comparison.baseline_mean_s) == (21.0, 25.0)
    assert comparison.change == pytest.approx(-0.16)
    # three unequal pairs (-2, +6, -20): signed ranks 1, 2 (+) and 3: W+ = 2 of 6
    assert comparison.p_lower == pytest.approx(0.375)
    assert (comparison.scenarios_lower, comparison.scenarios) == (2, 2)  # 14 < 15, 28 < 35


def test_evaluate_sets_each_throughput_policy_and_served_without_tests_against_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tested = write_throughput_runs(tmp_path / "tests", [10.0, 20.0, 30.0, 40.0], [8, 20, 36, 20])
    plain = write_throughput_runs(tmp_path / "plain", [5.0, 20.0, 30.0, 45.0], [1, 1, 1, 1])
    args = ["evaluate", "--decisions", str(tested), "--without-tests", str(plain)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| served_tput | served | 4 | 21.00 | 25.00 | -16.0 % | 0.375 | 2 of 2 |" in out
    assert "| served | served without tests | 4 | 25.00 | 25.00 | +0.0 % |" in out
    assert "| scenario-2-000 | 2 | 15.00 | 14.00 |" in out


def test_the_committed_throughput_capture_gives_the_figures_the_docs_quote() -> None:
    """docs/decisions.md section 8 and docs/model.md section 11 quote these."""
    data = Path(__file__).parents[2] / "training" / "data" / "decisions"
    lines = read_runs(data / "tput" / "held-out")
    comparisons = throughput_comparisons(lines, "regular", read_runs(data / "held-out"))
    by = {(c.label, c.baseline): c for c in comparisons}
    served_tput = by[("served_tput", "served")]
    assert (served_tput.requests, round(served_tput.mean_s, 2)) == (215, 17.82)
    assert round(100 * served_tput.change, 1) == 3.4 and round(served_tput.p_lower or 0, 2) == 0.79
    assert round(100 * by[("tput_only", "served")].change, 1) == 14.6
    with_tests = by[("served", "served without tests")]
    assert (round(with_tests.mean_s, 2), round(with_tests.baseline_mean_s, 2)) == (17.23, 17.53)
