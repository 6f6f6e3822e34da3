"""Smoke test of `python -m benchmarks.warm_start`: a small run end to end (private broker, a
real peer and a real replica `nettel serve`), its JSON report's shape, never its timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.broker]


def test_a_small_warm_start_benchmark_fills_every_link(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.warm_start", "--links", "60"]
    command += ["--output", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report = json.loads((tmp_path / "warm_start.json").read_text())
    assert report == json.loads(done.stdout)
    (run,) = report["runs"]
    assert (run["links"], run["links_with_32_samples"]) == (60, 60)
    assert run["bytes"] > 60 * 800  # every link's window and statistics crossed the wire
    assert 0 < run["transfer_and_load_seconds"] < run["request_to_ready_seconds"] < 60
    assert {"cpu_model", "cores", "git_commit"} <= set(report["environment"])
