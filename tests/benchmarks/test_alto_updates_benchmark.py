"""Smoke test of `python -m benchmarks.alto_updates`: a small run end to end, its report's shape
and what holds whatever the machine: no topology change, no network map patch; changed values,
a cost map patch; a second client of a resource costs no rebuild. Never its timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_a_small_update_stream_benchmark_reports_every_resource(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.alto_updates", "--links", "400"]
    command += ["--minutes", "2", "--endpoints", "10", "--output", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report = json.loads((tmp_path / "alto_updates.json").read_text())
    figures = report["resources"]
    assert len(figures) == 5 and "| network map | " in done.stdout.decode()
    assert figures["network map"]["patch_bytes"] == 0
    cost_map = figures["cost map priv:nettel-cost"]
    assert 0 < cost_map["patch_bytes"] <= cost_map["full_bytes"]
    assert {"cpu_model", "cores", "git_commit"} <= set(report["environment"])
