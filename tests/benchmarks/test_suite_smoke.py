"""Smoke test of the performance suite: `python -m benchmarks --quick` end to end.

Runs every measurement of the core group (the default without --only) with tiny sizes, a few
per test and suite run (real brokers, real `nettel serve` processes, wrk or the Python load
generator); test_measurements_quick.py runs some of the others. Each run costs seconds of its
own (imports, the machine's reference workload, an ActiveMQ its measurements share at quick
sizes), so the measurements share runs, grouped to take about as long each, and the workers
share the groups. Checks the shape of the JSON report and of the markdown, never the timings:
those depend on the machine and are the suite's output, not its correctness.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = (
    "ingest",
    "ingest_rabbitmq",
    "cycle",
    "memory",
    "link_flood",
    "api",
    "freshness",
    "start",
)
ENVIRONMENT_KEYS = {
    "reference_start",
    "reference_end",
    "cpu_model",
    "cores",
    "ram_bytes",
    "python",
    "numpy",
    "stomp_py",
    "activemq",
    "rabbitmq",
    "git_commit",
    "date",
    "load_generator",
    "model",
}
FIGURES = {
    "ingest": {
        "publish_rate",
        "bare_rate",
        "service_rate",
        "service_to_bare",
        "pipeline_alone_rate",
    },
    "ingest_rabbitmq": {"publish_rate", "bare_rate", "service_rate", "service_to_bare"},
    "cycle": {
        "median_1k",
        "max_1k",
        "scattered_median_1k",
        "time_ratio",
        "link_ratio",
        "growth_exponent",
    },
    "memory": {"state_per_link_1k", "rss_1k", "tensorflow_1k"},
    "link_flood": {"rss_before", "rss_1k", "rss_per_link_2k", "refused_2k", "metrics_2k"},
    "api": {
        "full_rate",
        "full_p99",
        "full_gzip_rate",
        "not_modified_rate",
        "one_pair_rate",
        "one_pair_p99",
    },
    "freshness": {"markers", "markers_seen", "p50", "p99"},
    "start": {"cold_median", "warm_median"},
}
TARGET_KEYS = {"key", "label", "value", "comparison", "limit", "unit", "met"}
#: The core measurements by suite run (about 30 s each alone on two cores).
RUNS = (
    ("ingest", "cycle", "memory", "api", "start"),
    ("ingest_rabbitmq", "link_flood", "freshness"),
)


def quick_run(output: Path, names: tuple[str, ...]) -> tuple[dict, str]:
    """`python -m benchmarks --quick --only NAMES`: its report and markdown."""
    docs = output / "performance.md"
    command = [sys.executable, "-m", "benchmarks", "--quick", "--only", ",".join(names)]
    completed = subprocess.run(
        [*command, "--output", str(output), "--docs", str(docs)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return json.loads((output / "report.json").read_text()), docs.read_text()


def test_the_core_group_is_what_runs_by_default() -> None:
    from benchmarks.__main__ import GROUPS

    assert tuple(GROUPS["core"]) == MEASUREMENTS


def test_the_runs_cover_the_core_group_once() -> None:
    assert sorted(name for run in RUNS for name in run) == sorted(MEASUREMENTS)


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.parametrize("names", RUNS, ids="+".join)
def test_each_core_measurement_reports_its_figures_and_targets(
    names: tuple[str, ...], tmp_path: Path
) -> None:
    report, markdown = quick_run(tmp_path, names)
    assert report["quick"] is True
    assert report["errors"] == {}
    assert set(report["measurements"]) == set(names)
    for name in names:
        measured = report["measurements"][name]
        assert FIGURES[name] <= set(measured["figures"]), name
        assert {"title", "method", "targets", "notes", "details"} <= set(measured), name
        for target in measured["targets"]:
            assert set(target) == TARGET_KEYS, name
            assert target["comparison"] in (">=", "<="), name
            assert target["met"] in (True, False, None), name
        assert measured["title"] in markdown, name
    targets = sum(len(report["measurements"][name]["targets"]) for name in names)
    assert targets == report["targets_total"]
    assert_markdown_renders_the_machine_and_targets(report, markdown)


def assert_markdown_renders_the_machine_and_targets(report: dict, markdown: str) -> None:
    assert ENVIRONMENT_KEYS <= set(report["environment"])
    assert markdown.startswith("# Performance")
    assert report["environment"]["cpu_model"] in markdown
    python_seconds = report["environment"]["reference_end"]["python"]
    assert python_seconds > 0 and f"Python {python_seconds:.3f}" in markdown
    assert "## Targets" in markdown
