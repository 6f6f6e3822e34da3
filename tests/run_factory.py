"""pScheduler run records for the tests, built from the sample of tests/data."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import orjson

from tests.data import load_sample

SAMPLE = "pscheduler-latencybg-run.json"
#: The sample's link (the same hosts as owdelay-histogram-real.json's link on the bus).
SOURCE_HOST = "ps-latency.site-a.example.org"
DESTINATION_HOST = "ps-latency.site-b.example.net"
#: The sample's `run.end-time`, 2026-11-20T10:17:05Z: its 60 s interval began at 10:16:05.
SAMPLE_END = int(datetime(2026, 11, 20, 10, 17, 5, tzinfo=UTC).timestamp())


def iso(epoch: float) -> str:
    """An epoch second as pScheduler writes times."""
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def run_record(
    end: float | None = None,
    run_id: str | None = None,
    result: dict[str, Any] | None = None,
    test_type: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """The sample run, posted at `end` (epoch s), named `run_id`, with spec fields overridden
    (keyword `source`, `dest`, `bucket_width` -> `bucket-width`, ...; None removes a field)."""
    record = copy.deepcopy(load_sample(SAMPLE)["body"])
    if end is not None:
        for name in ("start-time", "end-time", "added"):
            record["run"][name] = iso(end)
    if run_id is not None:
        record["id"] = run_id
        record["run"]["href"] = f"https://{SOURCE_HOST}/pscheduler/tasks/1b7e/runs/{run_id}"
    if result is not None:
        record["result"] = result
    if test_type is not None:
        record["test"]["type"] = test_type
    for name, value in spec.items():
        key = name.replace("_", "-")
        if value is None:
            record["test"]["spec"].pop(key, None)
        else:
            record["test"]["spec"][key] = value
    return record


def run_body(*args: Any, **kwargs: Any) -> bytes:
    """`run_record(...)` as the archiver sends it: compact JSON."""
    return orjson.dumps(run_record(*args, **kwargs))
