"""Backfill: `nettel serve --backfill-from` from process start to a full 32-minute matrix.

    python -m benchmarks.backfill [--links 15000] [--history S] [--concurrency N] [-- FLAGS]

A local archive server (`devtools.archive_server`, on a thread of this process; esmond and elmond
need Cassandra or OpenSearch) holds `links` links of a full mesh, each with a day of minutes up
to the current one (and a few beyond, served as their minutes come) of delay histograms (the
real 35-bucket histogram of tests/data, keyed as elmond keys it, shifted per link into 16
variants) and loss. A private ActiveMQ broker is up
first; `nettel serve --backfill-from` is launched (default settings, `--backfill-history` when
given, the shipped model when there is one) and the time runs from just before the process is
spawned until `/readyz` first answers 200 (polled every 50 ms): the backfill done and a matrix
computed after it. Then `/costmatrix` must hold every link with `samples` 32. Prints one JSON
document and writes it to `<output>/backfill.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

import httpx
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.broker import private_broker
from benchmarks.environment import REPO_ROOT, describe_environment
from benchmarks.link_fill import link_endpoints
from benchmarks.model import model_description, serve_model_args
from benchmarks.proc import cpu_seconds
from devtools.archive_server import ArchivedLink, ArchiveServer, elmond_histogram
from devtools.service_process import launch_service, wait_for_status
from service.config import Settings

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


def run(
    links: int, history: float | None, concurrency: int | None, extra: list[str], output: Path
) -> dict[str, Any]:
    work, logs = output / "work", output / "logs"
    # records run AHEAD_MINUTES past now, as a live archive's keep coming: the server answers
    # up to each request's time-end, so a minute that begins before the backfill reads it is
    # there (records only up to now would leave the window's newest minute empty then)
    archived = archived_links(links, ARCHIVED_MINUTES, time.time() + 60 * AHEAD_MINUTES)
    with private_broker(work, "backfill", logs) as broker, ArchiveServer(archived) as archive:
        args = [
            *serve_model_args(),
            "--client-id",
            "bench-backfill",
            "--backfill-from",
            archive.url,
        ]
        args += [] if history is None else ["--backfill-history", str(history)]
        args += [] if concurrency is None else ["--backfill-concurrency", str(concurrency)]
        args += extra
        server_cpu = time.process_time()  # this process: the archive server and the polling
        service = launch_service(broker.brokers, args, logs / "backfill-serve.log")
        try:
            healthy_at = wait_for_status(service, "/healthz", timeout=120, interval=0.05)
            ready_at = wait_for_status(service, "/readyz", timeout=600, interval=0.05)
            cpu = cpu_seconds(service.pid)
            server_cpu = time.process_time() - server_cpu
            matrix = httpx.get(f"{service.url}/costmatrix", timeout=60).json()
            metrics = backfill_metrics(httpx.get(f"{service.url}/metrics").text)
        finally:
            service.stop()
        requests = len(archive.requests)
    full = sum(1 for link in matrix["links"] if link["samples"] == 32)
    seconds = ready_at - service.launched_at
    return {
        "links": links,
        "backfill_history_seconds": history or Settings.model_fields["backfill_history"].default,
        "backfill_concurrency": concurrency
        or Settings.model_fields["backfill_concurrency"].default,
        "other_serve_arguments": extra,
        "start_to_ready_seconds": round(seconds, 2),
        "start_to_healthy_seconds": round(healthy_at - service.launched_at, 2),
        "links_with_32_samples": full,
        "service_cpu_seconds_until_ready": round(cpu, 2),
        "archive_server_cpu_seconds_until_ready": round(server_cpu, 2),
        "archive_requests": requests,
        **metrics,
        "target": f"start to full matrix <= {TARGET_SECONDS:.0f} s",
        "met": full == links and seconds <= TARGET_SECONDS,
        "environment": describe_environment("none", model_description()),
    }


def backfill_metrics(text: str) -> dict[str, float]:
    """The nettel_backfill_* samples of a /metrics text, by name and label value."""
    return {
        "_".join([sample.name.removeprefix("nettel_backfill_"), *sample.labels.values()]): (
            sample.value
        )
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("nettel_backfill_") and not sample.name.endswith("_created")
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.backfill", allow_abbrev=False)
    parser.add_argument("--links", type=int, default=15_000, help="archived links")
    parser.add_argument("--history", type=float, help="--backfill-history (default: its own)")
    parser.add_argument("--concurrency", type=int, help="--backfill-concurrency (default: its own)")
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "out" / "bench")
    parser.add_argument("serve_args", nargs="*", help="more `nettel serve` flags, after --")
    args = parser.parse_args(argv)
    result = run(args.links, args.history, args.concurrency, args.serve_args, args.output)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "backfill.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["links_with_32_samples"] == args.links else 1


if __name__ == "__main__":
    sys.exit(main())
