"""Backfill: `nettel serve --backfill-from` from process start to a full 32-minute matrix."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, overload

import httpx

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from benchmarks.support.broker import measurement_broker
from benchmarks.support.environment import REPO_ROOT
from benchmarks.support.link_fill import link_endpoints
from benchmarks.support.model import serve_model_args
from benchmarks.support.proc import cpu_seconds
from benchmarks.support.service_process import labelled_samples
from devtools.archive_server import ArchivedLink, ArchiveServer, elmond_histogram
from devtools.service_process import launch_service, wait_for_status

NAME = "backfill"
METHOD = (
    "A local archive server (`devtools/archive_server.py`, on a thread of the suite's process; "
    "esmond and elmond need Cassandra or OpenSearch) holds L links of a full mesh, each with a "
    "day of minutes up to the current one (and a few beyond, served as their minutes come, as a "
    "live archive's keep coming) of delay histograms (the real 35-bucket histogram of "
    "tests/data, keyed as elmond keys it, shifted per link into 16 variants) and loss. A private "
    "ActiveMQ broker is up first; `nettel serve --backfill-from` is launched (default settings, "
    "the shipped model when there is one) and the time runs from just before the process is "
    "spawned until `/readyz` first answers 200 (polled every 50 ms): the backfill done and a "
    "matrix computed after it. Then `/costmatrix` must hold every link with `samples` 32. CPU: "
    "the service process's until ready (its backfill parse child not counted) and the suite "
    "process's meanwhile (the archive server and the polling)."
)
TARGET_SECONDS = 30.0
ARCHIVED_MINUTES = 24 * 60
AHEAD_MINUTES = 10
VARIANTS = 16
LOSSES = (0.0, 0.0, 0.0, 0.0016666666666666668, 0.0, 0.005)
Record = dict[str, Any]


class MinuteRecords(Sequence[Record]):
    """`count` records a minute apart from `first_ts`, values taken in turn from `values`: made on
    demand, so 15,000 links of an hour cost no gigabytes in the archive server."""

    def __init__(self, first_ts: int, count: int, values: Sequence[Any], offset: int) -> None:
        self._first, self._count, self._values, self._offset = first_ts, count, values, offset

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> Record: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Record]: ...
    def __getitem__(self, index: int | slice) -> Record | Sequence[Record]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if not -self._count <= index < self._count:
            raise IndexError(index)
        i = index % self._count
        value = self._values[(i + self._offset) % len(self._values)]
        return {"ts": self._first + 60 * i, "val": value}


def histogram_variants() -> list[dict[str, int]]:
    """The real histogram, its delays shifted by 0, 0.37, 0.74, ... ms, keyed as elmond keys."""
    sample = json.loads((REPO_ROOT / "tests/data/owdelay-histogram-real.json").read_text())
    (buckets,) = sample["body"]["datapoints"].values()
    return [
        elmond_histogram({f"{float(d) + 0.37 * v:.2f}": c for d, c in buckets.items()})
        for v in range(VARIANTS)
    ]


def archived_links(count: int, minutes: int, now: float) -> list[ArchivedLink]:
    first = int(now) // 60 * 60 - 60 * (minutes - 1)
    variants = histogram_variants()
    return [
        ArchivedLink(
            source,
            destination,
            series={
                "histogram-owdelay": MinuteRecords(first, minutes, [variants[n % VARIANTS]], 0),
                "packet-loss-rate": MinuteRecords(first, minutes, LOSSES, n),
            },
        )
        for n, (source, destination) in enumerate(link_endpoints(count))
    ]


def run(ctx: SuiteContext) -> MeasurementResult:
    links = ctx.sizes.backfill_links
    result = MeasurementResult(NAME, "Backfill: process start to a full matrix", METHOD)
    ctx.log(f"backfill: {links:,} links")
    # records run AHEAD_MINUTES past now, as a live archive's keep coming: the server answers
    # up to each request's time-end, so a minute that begins before the backfill reads it is
    # there (records only up to now would leave the window's newest minute empty then)
    archived = archived_links(links, ARCHIVED_MINUTES, time.time() + 60 * AHEAD_MINUTES)
    with (
        measurement_broker(ctx, "backfill") as broker,
        ArchiveServer(archived) as archive,
    ):
        args = [*serve_model_args(), "--client-id", "bench-backfill", "--backfill-from"]
        server_cpu = time.process_time()
        service = launch_service(
            broker.brokers, [*args, archive.url], ctx.logs / "backfill-serve.log"
        )
        try:
            healthy_at = wait_for_status(service, "/healthz", timeout=120, interval=0.05)
            ready_at = wait_for_status(service, "/readyz", timeout=600, interval=0.05)
            cpu = cpu_seconds(service.pid)
            server_cpu = time.process_time() - server_cpu
            matrix = httpx.get(f"{service.url}/costmatrix", timeout=60).json()
            metrics = labelled_samples(service.url, "nettel_backfill_")
        finally:
            service.stop()
        requests = len(archive.requests)
    full = sum(1 for link in matrix["links"] if link["samples"] == 32)
    seconds = ready_at - service.launched_at
    result.add("links", "links archived", links)
    result.add("ready", "process start to ready (full matrix)", seconds, "s")
    result.add("healthy", "process start to /healthz 200", healthy_at - service.launched_at, "s")
    result.add("full", "links with 32 samples", full)
    result.add("service_cpu", "service CPU until ready (parse child not counted)", cpu, "s")
    result.add("archive_cpu", "archive server and polling CPU until ready", server_cpu, "s")
    result.add("archive_requests", "archive requests", requests)
    result.target(
        "ready", f"start to full matrix at {links:,} links", seconds, "<=", TARGET_SECONDS, "s"
    )
    result.target("links_missing", "links without a full window", links - full, "<=", 0)
    result.details["backfill_metrics"] = metrics
    return result
