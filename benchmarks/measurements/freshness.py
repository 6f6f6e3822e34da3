"""Freshness: publish a datapoint -> visible in /costmatrix, with background ingest running."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult, percentile
from benchmarks.support.broker import connect, measurement_broker
from benchmarks.support.corpus import build_marker_message
from benchmarks.support.environment import REPO_ROOT
from benchmarks.support.model import serve_model_args
from benchmarks.support.publishing import send
from benchmarks.support.service_process import scrape
from devtools.service_process import ServiceProcess, launch_service, wait_for_status
from service.config import Settings

NAME = "freshness"
POLL_SECONDS = 0.02
MARKER_DESTINATION = "192.0.2.250"
SETTLE_TIMEOUT = 45.0
#: Steady state: one default cycle interval after the last background link appeared.
STEADY_AFTER_WARM_UP = Settings.model_fields["interval"].default
#: At quick sizes (a smoke test, figures not representative) a second: the wait was most of it.
QUICK_STEADY_AFTER_WARM_UP = 1.0
WARM_UP_TIMEOUT = 60.0
METHOD = (
    "`python -m service serve` runs with default settings (only --brokers, --listen and its own "
    "--client-id; `--model none` when no bundle is shipped) against a private broker. A paced "
    "producer process (`benchmarks/support/paced_producer.py`) publishes realistic "
    "one-datapoint delay "
    "and loss messages round-robin over L links at R msg/s; once the service tracks all L links "
    "(or a minute passed) and one more default cycle interval (10 s; 1 s at quick sizes) went "
    "by, so that the "
    "one-off work of L links appearing within seconds (the first matrix and the first telemetry "
    "of every link) is behind and the service is in its steady state, marker datapoints are "
    "published every ~0.5 s, each a loss datapoint for a new link `10.200.x.y -> 192.0.2.250` "
    "dated at the current minute. One poller asks "
    "`/costmatrix?destination=192.0.2.250` every 20 ms (one request covers every marker; a "
    "per-marker source+destination query would multiply the load by the markers in flight) and "
    "notes when each marker link first appears. Latency = first response showing it - the time "
    "just before its SEND."
)


@dataclass
class MarkerBoard:
    """Publication and first-seen times of the markers, shared with the poller thread."""

    published: dict[str, float] = field(default_factory=dict)
    seen: dict[str, float] = field(default_factory=dict)
    polls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def latencies(self) -> list[float]:
        with self.lock:
            return [self.seen[s] - t for s, t in self.published.items() if s in self.seen]

    def all_seen(self) -> bool:
        with self.lock:
            return set(self.published) <= set(self.seen)


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    result = MeasurementResult(NAME, "Freshness: publish to /costmatrix", METHOD)
    result.add(
        "background_rate_target", "background ingest asked for", sizes.freshness_rate, "msg/s"
    )
    result.add("links", "background links", sizes.freshness_links)
    stats_file = ctx.work / "producer.json"
    with measurement_broker(ctx, "freshness") as broker:
        args = [*serve_model_args(), "--client-id", "bench-fresh"]
        service = launch_service(broker.brokers, args, ctx.logs / "freshness-service.log")
        producer = None
        try:
            wait_for_status(service, "/readyz", 200, timeout=60)
            producer = _start_producer(ctx, broker.brokers)
            with httpx.Client(timeout=5.0) as client:
                warm_up = _wait_for_links(client, service, sizes.freshness_links)
                result.add("warm_up_seconds", "warm-up until every link was tracked", warm_up, "s")
                steady = QUICK_STEADY_AFTER_WARM_UP if ctx.quick else STEADY_AFTER_WARM_UP
                time.sleep(steady)
                label = "then waited for the steady state"
                result.add("steady_wait_seconds", label, steady, "s")
                before = _timed_scrape(client, service)
                board = _run_markers(ctx, broker.brokers, service.url)
                stats = _stop_producer(producer, stats_file)  # before the last scrape
                after = _timed_scrape(client, service)
        finally:
            _stop_producer(producer, stats_file)
            service.stop()
    _figures(result, board, stats, _service_figures(before, after))
    return result


Scrape = tuple[float, dict[str, float]]


def _timed_scrape(client: httpx.Client, service: ServiceProcess) -> Scrape:
    return time.monotonic(), scrape(client, service)


def _service_figures(before: Scrape, after: Scrape) -> dict[str, float]:
    """Receive rate, cycles and mean cycle time between two scrapes; total received at the end."""
    seconds = after[0] - before[0]

    def delta(name: str) -> float:
        return after[1].get(name, 0.0) - before[1].get(name, 0.0)

    cycles = delta("nettel_cycle_duration_seconds_count")
    return {
        "receive_rate": delta("nettel_messages_received_total") / seconds,
        "received_total": after[1].get("nettel_messages_received_total", 0.0),
        "cycles": cycles,
        "cycle_mean": delta("nettel_cycle_duration_seconds_sum") / cycles if cycles else math.nan,
    }


def _run_markers(ctx: SuiteContext, brokers: str, url: str) -> MarkerBoard:
    """Publish the markers while polling for them; wait until all are seen (or time out)."""
    board, stop = MarkerBoard(), threading.Event()
    poller = threading.Thread(target=_poll, args=(url, board, stop), daemon=True)
    poller.start()
    try:
        _publish_markers(ctx, brokers, board)
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while not board.all_seen() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        poller.join()
    return board


def _start_producer(ctx: SuiteContext, brokers: str) -> subprocess.Popen[bytes]:
    ready = ctx.work / "producer.ready"
    command = [sys.executable, "-m", "benchmarks.support.paced_producer", "--brokers", brokers]
    command += ["--links", str(ctx.sizes.freshness_links), "--rate", str(ctx.sizes.freshness_rate)]
    command += ["--cache", str(ctx.cache), "--ready-file", str(ready)]
    command += ["--output", str(ctx.work / "producer.json")]
    with (ctx.logs / "paced-producer.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"paced producer did not start; see {ctx.logs / 'paced-producer.log'}"
            )
        time.sleep(0.1)
    return process


def _stop_producer(process: subprocess.Popen[bytes] | None, output: Path) -> dict:
    """SIGTERM the producer (if still running) and read its statistics."""
    if process is None:
        return {}
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return json.loads(output.read_text()) if output.exists() else {}


def _wait_for_links(client: httpx.Client, service: ServiceProcess, links: int) -> float:
    started = time.monotonic()
    while time.monotonic() - started < WARM_UP_TIMEOUT:
        service.check_alive()
        if scrape(client, service).get("nettel_links_tracked", 0) >= links:
            break
        time.sleep(0.5)
    return time.monotonic() - started


def _publish_markers(ctx: SuiteContext, brokers: str, board: MarkerBoard) -> None:
    connection = connect(brokers)
    try:
        for number in range(ctx.sizes.freshness_markers):
            source = f"10.200.{number // 250}.{number % 250 + 1}"
            ts = int(time.time() // 60) * 60
            message = build_marker_message(source, MARKER_DESTINATION, ts, 0.001 * (number % 7))
            with board.lock:
                board.published[source] = time.time()
            send(connection, message)
            time.sleep(ctx.sizes.freshness_marker_interval)
    finally:
        connection.disconnect()


def _poll(url: str, board: MarkerBoard, stop: threading.Event) -> None:
    with httpx.Client(timeout=5.0) as client:
        while not stop.is_set():
            started = time.monotonic()
            try:
                response = client.get(
                    f"{url}/costmatrix", params={"destination": MARKER_DESTINATION}
                )
                seen_at = time.time()
                sources = (
                    [link["source"] for link in response.json()["links"]]
                    if response.status_code == 200
                    else []
                )
            except (httpx.HTTPError, ValueError, KeyError):
                sources = []
            with board.lock:
                board.polls += 1
                for source in sources:
                    board.seen.setdefault(source, seen_at)
            stop.wait(max(0.0, POLL_SECONDS - (time.monotonic() - started)))


def _figures(
    result: MeasurementResult, board: MarkerBoard, producer: dict, service: dict[str, float]
) -> None:
    latencies = board.latencies()
    result.add(
        "background_rate", "background ingest achieved (producer)", producer.get("rate"), "msg/s"
    )
    result.add(
        "producer_max_behind",
        "producer's worst lag behind its schedule",
        producer.get("max_behind"),
        "s",
    )
    result.add(
        "service_receive_rate",
        "service receive rate while markers ran",
        service["receive_rate"],
        "msg/s",
    )
    backlog = producer.get("sent", 0) + len(board.published) - int(service["received_total"])
    result.add("backlog_end", "messages published but not yet received at the end", backlog)
    result.add("cycles", "matrix cycles while markers ran", int(service["cycles"]))
    result.add("cycle_mean", "mean cycle time while markers ran", service["cycle_mean"], "s")
    result.add("markers", "markers published", len(board.published))
    result.add("markers_seen", "markers seen in /costmatrix", len(latencies))
    result.add("polls", "polls of /costmatrix", board.polls)
    result.add("p50", "publish to visible: p50", percentile(latencies, 50), "s")
    result.add("p99", "publish to visible: p99", percentile(latencies, 99), "s")
    result.add("max", "publish to visible: max", max(latencies) if latencies else None, "s")
    p99 = percentile(latencies, 99) if len(latencies) == len(board.published) else None
    result.target("p99", "publish to visible p99 (all markers seen)", p99, "<=", 2.0, "s")
    result.details["latencies_in_publish_order"] = [round(x, 3) for x in latencies]
    if service["receive_rate"] < 0.95 * (producer.get("rate") or 0.0):
        result.notes.append(
            "The service received less than the background rate, so a backlog built up on the "
            "broker and the latencies are mostly time spent queued behind it."
        )
