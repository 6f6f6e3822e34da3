"""Without the C histogram scanner (installed with no compiler) nettel parses the same results.

The extension is hidden from fresh interpreters by a `sitecustomize.py` put first on their
PYTHONPATH, as if the build had skipped it: a parser process, compared over a corpus with this
process's C path, and a real `nettel serve` fed a real histogram (a pScheduler run over HTTP, whose
parser scans its histogram as the bus's does).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devtools.waiting import wait_for
from service.parse import histogram_scan
from service.parse.limits import InputLimits
from service.parse.perfsonar import parse_messages
from service.parse.records import MeasurementKind, ParsedMessage
from tests.integration.wire import get_json
from tests.message_factory import BASE_TS, body, histogram, sample_body
from tests.parse.test_histogram_scan import comparable, delay_bodies
from tests.run_factory import SOURCE_HOST, run_body

DELAY = MeasurementKind.DELAY
LOSS = MeasurementKind.LOSS
REPO_ROOT = Path(__file__).resolve().parents[2]
HIDE_SCANNER = 'import sys\nsys.modules["service.parse._histogram_scan"] = None\n'

#: Reads (frames, InputLimits fields) pickles from stdin, writes comparable parse results.
WORKER = """
import pickle, sys
from service.errors import RejectedInput
from service.parse.histogram_scan import SCANNER_IMPLEMENTATION
from service.parse.limits import InputLimits
from service.parse.perfsonar import parse_messages

out = sys.stdout.buffer
pickle.dump(SCANNER_IMPLEMENTATION, out)
out.flush()
while (request := pickle.load(sys.stdin.buffer)) is not None:
    frames, limits = request
    results = parse_messages(frames, InputLimits(**limits))
    pickle.dump(
        [("rejected", r.reason, r.detail) if isinstance(r, RejectedInput) else r for r in results],
        out,
    )
    out.flush()
"""

pytestmark = pytest.mark.skipif(
    histogram_scan.SCANNER_IMPLEMENTATION != "c",
    reason="the C scanner is not built here: nothing to compare the Python path with",
)


def without_scanner(folder: Path) -> dict[str, str]:
    """Environment whose Python processes cannot import the C scanner (a sitecustomize)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(HIDE_SCANNER)
    path = [str(folder), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in path if p)}


class PythonPathParser:
    """A fresh interpreter without the C scanner that parses batches on request."""

    def __init__(self, folder: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER],
            cwd=REPO_ROOT,
            env={**os.environ, **without_scanner(folder)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.requests, self.replies = self.process.stdin, self.process.stdout
        self.implementation = pickle.load(self.replies)

    def parse(self, frames: list[tuple[MeasurementKind, bytes]], **limits: int) -> list[Any]:
        pickle.dump((frames, limits), self.requests)
        self.requests.flush()
        return pickle.load(self.replies)

    def close(self) -> None:
        pickle.dump(None, self.requests)
        self.requests.close()
        assert self.process.wait(10) == 0


@pytest.fixture(scope="module")
def python_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PythonPathParser]:
    parser = PythonPathParser(tmp_path_factory.mktemp("no-scanner"))
    yield parser
    parser.close()


def with_c_scanner(frames: list[tuple[MeasurementKind, bytes]], **limits: int) -> list[Any]:
    return [comparable(r) for r in parse_messages(frames, InputLimits(**limits))]


def test_the_hidden_extension_means_the_python_path(python_path: PythonPathParser) -> None:
    assert python_path.implementation == "python"


SAMPLES = [
    (DELAY, sample_body("owdelay-histogram-real.json")),
    (DELAY, sample_body("owdelay-v2-push.json")),
    (LOSS, sample_body("packet-loss-rate.json")),
    (DELAY, body({BASE_TS: histogram(2.5), BASE_TS + 60: {"2.6": 300, "2.60": 300}})),
    (DELAY, body({BASE_TS: {"1.5": 1, "2.5": 2, "3.5": 3, "4.5": 4}})),
    (DELAY, body({BASE_TS: {}, BASE_TS + 60: {"2.5": "x"}})),
    (DELAY, b'{"meta": {}, "datapoints": {"1700000040": {"2.5": 1}'),
]


@pytest.mark.parametrize(
    "limits",
    [{}, {"max_buckets": 3}, {"max_string_length": 12}, {"max_datapoints": 1}],
    ids=["defaults", "few-buckets", "short-strings", "one-datapoint"],
)
def test_samples_parse_the_same(python_path: PythonPathParser, limits: dict[str, int]) -> None:
    expected = with_c_scanner(SAMPLES, **limits)
    assert python_path.parse(SAMPLES, **limits) == expected


def test_real_histogram_statistics_on_the_python_path(python_path: PythonPathParser) -> None:
    [message] = python_path.parse([SAMPLES[0]])
    assert isinstance(message, ParsedMessage)
    [(ts, stats)] = message.delays
    assert ts == BASE_TS
    assert (stats.packets, stats.median, stats.minimum) == (600, 2.60, 2.51)
    assert stats.mean == pytest.approx(2.9321, abs=1e-4)


@given(
    bodies=st.lists(delay_bodies(), min_size=1, max_size=4),
    max_buckets=st.sampled_from([10_000, 3]),
)
@settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
)
def test_generated_bodies_parse_the_same(
    python_path: PythonPathParser, bodies: list[bytes], max_buckets: int
) -> None:
    frames = [(DELAY, b) for b in bodies] + [(LOSS, b'{"datapoints": {"60": 0.1}}')]
    expected = with_c_scanner(frames, max_buckets=max_buckets)
    assert python_path.parse(frames, max_buckets=max_buckets) == expected


# ---- a real service --------------------------------------------------------------------------


def test_serve_without_the_extension_serves_exact_statistics(
    nettel_service: Any, tmp_path: Path
) -> None:
    token = "fallback-ingest-token"
    env = without_scanner(tmp_path / "no-scanner") | {"NETTEL_INGEST_TOKEN": token}
    service = nettel_service("none", "--interval", "1", env=env)
    logs = [json.loads(line) for line in service.log_text().splitlines() if line.startswith("{")]
    [scanner_log] = [entry for entry in logs if "histogram_scanner" in entry]
    assert (scanner_log["histogram_scanner"], scanner_log["level"]) == ("python", "warning")

    run = run_body(time.time(), run_id="no-scanner")  # the real histogram of the bus sample
    headers = {"Authorization": f"Bearer {token}"}
    assert (
        httpx.put(f"{service.url}/ingest/pscheduler", content=run, headers=headers).status_code
        == 202
    )

    def delay_of_the_link() -> dict[str, float] | None:
        matrix = get_json(f"{service.url}/costmatrix", source=SOURCE_HOST)
        links = (matrix or {}).get("links", [])
        return links[0]["delay_ms"] if links and links[0]["delay_ms"] else None

    delay = wait_for(delay_of_the_link, what="the sample link's delay in /costmatrix")
    assert (delay["mean"], delay["median"]) == (2.9321, 2.6)
