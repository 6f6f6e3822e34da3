"""Smoke test of `python -m benchmarks.backfill`: a small run end to end (private broker, local
archive server, real `nettel serve`), its JSON report's shape, never its timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.broker]


def test_a_small_backfill_benchmark_fills_every_link(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.backfill", "--links", "60"]
    command += ["--output", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report = json.loads((tmp_path / "backfill.json").read_text())
    assert report == json.loads(done.stdout)
    assert (report["links"], report["links_with_32_samples"]) == (60, 60)
    assert report["links_total_filled"] == 60 and report["archive_requests"] == 2 + 2 * 60
    # 32 even when a minute began since the data was made: the archive has the minutes ahead
    assert report["datapoints_total_window"] == 2 * 60 * 32
    assert 0 < report["start_to_ready_seconds"] < 60
    assert {"cpu_model", "cores", "git_commit"} <= set(report["environment"])
