"""Measurements run end to end by the suite at quick sizes (`--quick --only NAMES`): their report's
shape and what holds whatever the machine, never their timings.

A suite run costs more CPU of its own (interpreter, imports, the machine's reference workload, a
broker) than most of these measurements at quick sizes, so the tests of one `RUNS` group share
one run: the first test to ask runs it, on whichever xdist worker, and the others read its report.
A group's tests carry the same marks, so selecting by mark never runs a group for nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from service.parse.records import MeasurementKind
from tests.run_directory import locked, run_directory

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The measurements by shared run: those needing nothing, and the two with a broker (slow).
RUNS = (("alto_updates", "decisions", "result_alarms", "cycle_results"), ("warm_start", "backfill"))


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the runs go: this session's directory, shared by its xdist workers."""
    return run_directory(tmp_path_factory)


def quick_run(name: str, runs: Path) -> dict[str, Any]:
    """`python -m benchmarks --quick --only <NAME's group>` (once per session); the figures and
    targets of NAME's section of the report."""
    names = next(run for run in RUNS if name in run)
    output = runs / ("quick-" + "+".join(names))
    with locked(output.with_suffix(".lock")):
        if not (output / "report.json").exists():
            command = [sys.executable, "-m", "benchmarks", "--quick", "--only", ",".join(names)]
            command += ["--fresh", "--output", str(output), "--docs", "none"]
            done = subprocess.run(
                command, cwd=REPO_ROOT, capture_output=True, timeout=300, check=False
            )
            assert (output / "report.json").exists(), done.stderr.decode()[-3000:]
    report = json.loads((output / "report.json").read_text())
    assert name not in report["errors"], report["errors"][name]
    assert report["quick"] is True
    assert {"cpu_model", "cores", "git_commit"} <= set(report["environment"])
    measurement: dict[str, Any] = report["measurements"][name]
    return {key: f["value"] for key, f in measurement["figures"].items()} | {
        "targets": {t["key"]: t for t in measurement["targets"]}
    }


def test_alto_update_streams_send_patches_no_larger_than_documents(runs: Path) -> None:
    figures = quick_run("alto_updates", runs)
    assert figures["patch_0"] == 0  # the network map: no topology change, no patch
    assert 0 < figures["patch_1"] <= figures["full_1"]  # the cost map: changed values
    assert figures["targets"]["network_patch"]["met"] is True


@pytest.mark.slow
@pytest.mark.broker
def test_backfill_fills_every_link(runs: Path) -> None:
    figures = quick_run("backfill", runs)
    assert (figures["links"], figures["full"]) == (60, 60)
    listings = len(MeasurementKind)  # one metadata listing per event type
    assert figures["archive_requests"] == listings + 2 * 60
    assert 0 < figures["ready"] < 60


@pytest.mark.slow
@pytest.mark.broker
def test_warm_start_fills_every_link(runs: Path) -> None:
    figures = quick_run("warm_start", runs)
    assert figures["full_60"] == 60
    assert figures["bytes_60"] > 60 * 800  # every link's window and statistics crossed the wire
    assert 0 < figures["transfer_60"] < figures["ready_60"] < 60


def test_decisions_reads_the_committed_capture_and_checks_its_targets(runs: Path) -> None:
    figures = quick_run("decisions", runs)
    assert 0 < figures["regular_oracle_mean_s"] <= figures["regular_random_mean_s"]
    assert figures["regular_served_mean_s"] > 0 and figures["herding_served_mean_s"] > 0
    targets = figures["targets"]
    assert {"served_oracle_ratio", "served_mean_gain", "served_p90_gain", "served_over_no_model",
            "rucio_over_stale_served", "herding_served_over_random"} <= set(targets)  # fmt: skip
    assert all(target["met"] is not None for target in targets.values())


def test_result_alarms_raise_each_faults_alarm_and_none_elsewhere(runs: Path) -> None:
    figures = quick_run("result_alarms", runs)
    for fault in ("link", "site", "cut"):
        assert figures[f"{fault}_detected"] == "1 of 1"
        assert 20 <= figures[f"{fault}_median_min"] <= 32  # persistence 20 min + trace phase
    assert figures["drop_detected"] == "1 of 1"
    assert figures["false_result_alarms"] == 0 and figures["calm_link_days"] > 0


def test_cycle_results_times_both_states_at_the_largest_cycle_size(runs: Path) -> None:
    from benchmarks.sizes import QUICK

    figures = quick_run("cycle_results", runs)
    assert figures["links"] == QUICK.cycle_links[-1]
    assert figures["median_with"] > 0 and figures["median_without"] > 0
    assert "median_with" in figures["targets"]
