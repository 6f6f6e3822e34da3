"""Ingest: how fast `nettel serve` drains a backlog of real-format messages, vs bare stomp.py."""

from __future__ import annotations

import cProfile
import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from benchmarks.support.broker import (
    broker_limits,
    durable_subscriptions,
    flow_control_lines,
    measurement_broker,
    register_durable,
)
from benchmarks.support.corpus import Corpus, build_ingest_corpus
from benchmarks.support.environment import REPO_ROOT
from benchmarks.support.model import serve_model_args
from benchmarks.support.proc import children_of, cpu_seconds, tree_cpu_seconds
from benchmarks.support.profiling import (
    PySpyRecording,
    cprofile_top,
    profile_table,
    summarise_folded,
    thread_table,
)
from benchmarks.support.publishing import PublishResult, publish_all
from benchmarks.support.receive_path import receive_cpu_us
from benchmarks.support.service_process import scrape
from devtools.activemq import ActiveMQProcess
from devtools.rabbitmq import RabbitMQProcess
from devtools.service_process import ServiceProcess, launch_service
from service.broker.flavour import Flavour
from service.config import (
    DELAY_TOPIC,
    LOSS_TOPIC,
    RETRANSMITS_TOPIC,
    THROUGHPUT_TOPIC,
    TRACE_TOPIC,
    Settings,
)
from service.ingest.pipeline import IngestPipeline
from service.parse.records import MeasurementKind
from service.state.link_state import LinkState

NAME = "ingest"
TOPICS = (DELAY_TOPIC, LOSS_TOPIC)
#: Every topic `nettel serve` subscribes to by default, by the event type it carries.
TOPIC_KINDS = {
    DELAY_TOPIC: MeasurementKind.DELAY,
    LOSS_TOPIC: MeasurementKind.LOSS,
    THROUGHPUT_TOPIC: MeasurementKind.THROUGHPUT,
    RETRANSMITS_TOPIC: MeasurementKind.RETRANSMITS,
    TRACE_TOPIC: MeasurementKind.TRACE,
}
SERVICE_CLIENT = "bench-svc"
BARE_CLIENT = "bench-bare"
#: Broker prefetch for both consumers. Not the service's default (20,000): on this ActiveMQ
#: (5.17.2, the devtools configuration) a durable topic subscription that drains a stored
#: backlog with a prefetch of 5,000 or 20,000 received duplicates and never got a few percent
#: of the messages (up to 26 % at 20,000), for a bare stomp.py consumer as for the service;
#: with 1,000 or 2,000 every message arrived exactly once.
PREFETCH = 1000
DEFAULT_PREFETCH = int(Settings.model_fields["prefetch"].default)
POLL_SECONDS = 0.1
IDLE_TIMEOUT = 60.0
#: After the N-th message, keep watching this long for redeliveries.
GRACE_SECONDS = 2.0
PIPELINE_MESSAGES = 20_000
#: Publish-and-drain rounds; odd rounds drain the bare consumer first, even ones the service,
#: so neither gains from going second (a warmed broker) and one slow drain weighs half.
ROUNDS = 2
#: At quick sizes (a smoke test: no rate worth a mean) one round, and redeliveries are counted
#: for half a second.
QUICK_ROUNDS = 1
QUICK_GRACE_SECONDS = 0.5
#: Frames per batch in the in-process run, as the service's frame batcher takes them at most.
PIPELINE_BATCH = 512
METHOD = (
    "N real-format messages (simulator histograms, version-1 bus layout, 1-3 datapoints each, "
    "timestamps in the minutes just before the run) over L links are published persistently to a "
    "private ActiveMQ from a few producer threads, after both durable subscriptions were registered"
    " (connect, subscribe, disconnect). Then, alone on the machine, each consumer drains its copy "
    "in turn: the bare stomp.py consumer (`benchmarks/support/bare_consumer.py`: same topics, "
    "durable subscription `bench-bare`, same prefetch and heart-beats, ack auto, only counts "
    "frames), whose rate is (N - 1) / (time of the N-th frame - time of the first), and `python -m "
    "service serve --subscription durable --client-id bench-svc --prefetch 1000` (otherwise default"
    " settings; both consumers use prefetch 1,000, see the note). This runs twice (publish, drain, "
    "drain; once at quick sizes), the bare consumer first in round 1 and the service first in round"
    " 2, and the rates are the means of the two rounds; CPU, profile and timeline figures are round"
    " 1's. For the service, /metrics is polled every 100 ms and the rate is (received at the first "
    "poll that saw >= N - received at the first poll that saw any) / (time of the last message at "
    "that poll, i.e. poll time - `nettel_seconds_since_last_message`, - time of the first poll). "
    "Both consumers then listen 2 s more (0.5 s at quick sizes) to count redeliveries. py-spy "
    "samples the service until its N-th message (`--nonblocking --gil`, 100 Hz: only samples of the"
    " thread holding the GIL, so the shares say where the receiving process's one core of Python "
    "goes; the parser processes are not sampled). Finally the parse+apply pipeline alone runs "
    "in-process (no broker) on the first 20,000 messages in batches of 512 (the frame batcher's "
    "largest), once timed and once under cProfile; and the STOMP receive path alone "
    "(`benchmarks/support/receive_path.py`): the same 20,000 messages as ActiveMQ's MESSAGE frames,"
    " read from memory by stomp.py's reader and by the service's, best of 3, CPU per message. CPU "
    "per message: user + system time (/proc) of the broker, of the bare consumer (its whole run) "
    "and of the service process and its parser processes (from the first poll that saw a message to"
    " the N-th message), divided by the messages in that span; the two cores are the budget all of "
    "them share."
)


@dataclass(frozen=True)
class CpuReading:
    """CPU seconds used so far by the service process, its parser processes and the broker."""

    receiving: float
    parsers: float
    broker: float

    @classmethod
    def take(cls, service_pid: int, broker_pid: int) -> CpuReading:
        parsers = sum(cpu_seconds(child) for child in children_of(service_pid))
        return cls(cpu_seconds(service_pid), parsers, tree_cpu_seconds(broker_pid))


@dataclass
class Drain:
    """What the service did with its backlog, from /metrics polls."""

    received: int = 0
    applied: int = 0
    rejected: int = 0
    first_poll: tuple[float, int] | None = None
    reached: tuple[float, int] | None = None
    connected_at: float | None = None
    cycle_seconds_mean: float | None = None
    cycles: int = 0
    timeline: list[tuple[float, int]] = field(default_factory=list)
    profile: dict | None = None
    cpu_first: CpuReading | None = None
    cpu_reached: CpuReading | None = None

    def rate(self) -> float | None:
        """Messages per second from the first poll that saw any to the N-th message."""
        if self.first_poll is None or self.reached is None:
            return None
        (start, counted), (end, count) = self.first_poll, self.reached
        return (count - counted) / (end - start) if end > start and count > counted else None

    def rate_from_connect(self) -> float | None:
        if self.connected_at is None or self.reached is None:
            return None
        end, count = self.reached
        return count / (end - self.connected_at)


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    result = MeasurementResult(NAME, "Ingest: broker to link state", METHOD)
    ctx.log(
        f"ingest: building {sizes.ingest_messages:,} messages over {sizes.ingest_links:,} links"
    )
    corpus = build_ingest_corpus(sizes.ingest_messages, sizes.ingest_links, time.time(), ctx.cache)
    corpus_figures(result, corpus)
    with measurement_broker(ctx, "ingest") as broker:
        register_subscriptions(broker.brokers, "activemq")
        rounds = [ingest_round(ctx, broker, corpus, n, "activemq") for n in round_numbers(ctx)]
        result.details["broker_limits"] = broker_limits(broker)
        result.details["flow_control_log_lines"] = flow_control_lines(broker)[:20]
    ctx.log("ingest: in-process pipeline and receive path")
    alone_rate, alone_profile = pipeline_alone(corpus)
    rate_figures(result, corpus, rounds, "activemq")
    result.add("pipeline_alone_rate", "parse+apply in-process, no broker", alone_rate, "msg/s")
    _receive_figures(result, receive_cpu_us(corpus.messages[:PIPELINE_MESSAGES]))
    _profile_details(result, rounds[0].drain.profile, alone_profile)
    return result


def round_numbers(ctx: SuiteContext) -> range:
    """The rounds' numbers: 1 to ROUNDS (QUICK_ROUNDS at quick sizes)."""
    return range(1, (QUICK_ROUNDS if ctx.quick else ROUNDS) + 1)


def grace_seconds(ctx: SuiteContext) -> float:
    """How long both consumers listen on after the N-th message."""
    return QUICK_GRACE_SECONDS if ctx.quick else GRACE_SECONDS


@dataclass(frozen=True)
class Round:
    published: PublishResult
    bare: dict
    drain: Drain


def ingest_round(
    ctx: SuiteContext,
    broker: ActiveMQProcess | RabbitMQProcess,
    corpus: Corpus,
    number: int,
    flavour: Flavour,
    topics: tuple[str, ...] = TOPICS,
) -> Round:
    """Publish the corpus, then drain both copies: the bare consumer first in odd rounds (it
    subscribes to `topics`; the service to its default topics)."""
    ctx.log(f"ingest ({flavour}): round {number}: publishing")
    published = publish_all(broker.brokers, corpus.messages, ctx.sizes.producer_threads)
    ctx.log(f"ingest ({flavour}): round {number}: published at {published.rate:,.0f} msg/s")
    n, broker_pid = len(corpus.messages), broker.pid or 0

    def bare_drain() -> dict:
        broker_before = tree_cpu_seconds(broker_pid)
        bare = _run_bare_consumer(ctx, broker.brokers, n, flavour, topics)
        rate = bare.get("rate") or 0
        ctx.log(f"ingest ({flavour}): round {number}: bare consumer {rate:,.0f} msg/s")
        return bare | {"broker_cpu": tree_cpu_seconds(broker_pid) - broker_before}

    def service_drain() -> Drain:
        drain = _drain_service(ctx, broker.brokers, n, broker_pid, flavour)
        ctx.log(f"ingest ({flavour}): round {number}: service {drain.rate() or 0:,.0f} msg/s")
        return drain

    if number % 2:
        bare = bare_drain()
        return Round(published, bare, service_drain())
    drain = service_drain()
    return Round(published, bare_drain(), drain)


def corpus_figures(result: MeasurementResult, corpus: Corpus) -> None:
    result.add("messages", "messages published (N)", len(corpus.messages))
    result.add("links", "links", corpus.links)
    result.add("datapoints", "datapoints in them", corpus.datapoints)
    result.add("mean_buckets", "mean buckets per histogram", round(corpus.mean_buckets, 1))
    result.add(
        "mean_body_bytes", "mean body size", round(corpus.body_bytes / len(corpus.messages)), "B"
    )


def register_subscriptions(
    brokers: str, flavour: Flavour, topics: tuple[str, ...] = TOPICS
) -> None:
    """Both consumers' durable subscriptions, so the broker keeps what is published next."""
    for client in (SERVICE_CLIENT, BARE_CLIENT):
        register_durable(brokers, client, durable_subscriptions(client, topics, PREFETCH, flavour))


def _run_bare_consumer(
    ctx: SuiteContext, brokers: str, expected: int, flavour: Flavour, topics: tuple[str, ...]
) -> dict:
    output = ctx.work / "bare-consumer.json"
    command = [sys.executable, "-m", "benchmarks.support.bare_consumer", "--brokers", brokers]
    command += ["--client-id", BARE_CLIENT, "--topics", ",".join(topics), "--flavour", flavour]
    command += ["--expect", str(expected), "--prefetch", str(PREFETCH), "--output", str(output)]
    command += ["--idle-timeout", str(IDLE_TIMEOUT), "--grace", str(grace_seconds(ctx))]
    before = _children_cpu()
    with (ctx.logs / f"bare-consumer-{flavour}.log").open("wb") as log:
        subprocess.run(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, check=False)
    bare = json.loads(output.read_text()) if output.exists() else {"received": 0}
    return bare | {"cpu": _children_cpu() - before}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _drain_service(
    ctx: SuiteContext, brokers: str, expected: int, broker_pid: int, flavour: Flavour
) -> Drain:
    args = [*serve_model_args(), "--subscription", "durable", "--client-id", SERVICE_CLIENT]
    args += ["--prefetch", str(PREFETCH), "--broker-flavour", flavour]
    service = launch_service(brokers, args, ctx.logs / f"ingest-service-{flavour}.log")
    drain, spy = Drain(), None
    try:
        with httpx.Client(timeout=5.0) as client:
            spy = _poll_until_drained(
                client, service, expected, drain, broker_pid, grace_seconds(ctx)
            )
    finally:
        if spy is not None:
            folded = spy.stop()
            drain.profile = summarise_folded(folded) if folded else None
        service.stop()
    drain.connected_at = _connected_at(service.log_path)
    return drain


def _poll_until_drained(
    client: httpx.Client,
    service: ServiceProcess,
    expected: int,
    drain: Drain,
    broker_pid: int,
    grace: float,
) -> PySpyRecording | None:
    """Poll /metrics until N messages arrived and then `grace` seconds passed without a change."""
    spy, last_change = None, time.monotonic()
    while time.monotonic() - last_change < (grace if drain.reached else IDLE_TIMEOUT):
        service.check_alive()
        polled_at = time.time()
        try:
            metrics = scrape(client, service)
        except httpx.HTTPError:
            time.sleep(POLL_SECONDS)
            continue
        if spy is None:
            spy = PySpyRecording.start(
                service.pid, service.log_path.parent / "ingest-profile.folded"
            )
        if _record_poll(drain, metrics, polled_at):
            last_change = time.monotonic()
        if drain.first_poll is not None and drain.cpu_first is None:
            drain.cpu_first = CpuReading.take(service.pid, broker_pid)
        if drain.received >= expected and drain.reached is None:
            last_message = polled_at - metrics["nettel_seconds_since_last_message"]
            drain.reached = (last_message, drain.received)
            drain.cpu_reached = CpuReading.take(service.pid, broker_pid)
            if spy is not None:
                spy.stop()
        time.sleep(max(0.0, POLL_SECONDS - (time.time() - polled_at)))
    return spy


def _record_poll(drain: Drain, metrics: dict[str, float], polled_at: float) -> bool:
    """Store one poll; True when the received count moved."""
    received = int(metrics.get("nettel_messages_received_total", 0))
    moved = received != drain.received
    drain.received = received
    drain.applied = int(metrics.get("nettel_datapoints_applied_total", 0))
    drain.rejected = int(metrics.get("nettel_rejected_total", 0))
    drain.cycles = int(metrics.get("nettel_cycle_duration_seconds_count", 0))
    if drain.cycles:
        drain.cycle_seconds_mean = metrics["nettel_cycle_duration_seconds_sum"] / drain.cycles
    if received and drain.first_poll is None:
        drain.first_poll = (polled_at, received)
    drain.timeline.append((round(polled_at, 3), received))
    return moved


def _connected_at(log_path: Path) -> float | None:
    """Wall time of the service's first "broker connected" log line."""
    for line in log_path.read_text(errors="replace").splitlines():
        if '"broker connected"' in line:
            try:
                return float(orjson.loads(line)["time"])
            except (orjson.JSONDecodeError, KeyError, ValueError):
                return None
    return None


def pipeline_alone(corpus: Corpus) -> tuple[float, dict]:
    """Parse + apply in-process (no broker, no HTTP) in the service's batches; timed, profiled."""
    frames = [(m.destination, m.body, None) for m in corpus.messages[:PIPELINE_MESSAGES]]
    batches = [frames[i : i + PIPELINE_BATCH] for i in range(0, len(frames), PIPELINE_BATCH)]
    topics = TOPIC_KINDS
    pipeline = IngestPipeline(LinkState(), topics)
    started = time.perf_counter()
    for batch in batches:
        pipeline.handle_frames(batch)
    rate = len(frames) / (time.perf_counter() - started)
    pipeline = IngestPipeline(LinkState(), topics)
    profile = cProfile.Profile()
    profile.enable()
    for batch in batches:
        pipeline.handle_frames(batch)
    profile.disable()
    return rate, cprofile_top(profile)


def rate_figures(
    result: MeasurementResult, corpus: Corpus, rounds: list[Round], flavour: Flavour
) -> None:
    n, first = len(corpus.messages), rounds[0]
    label = f"publish rate ({first.published.threads} producer threads, persistent; round 1)"
    result.add("publish_rate", label, first.published.rate, "msg/s")
    result.add("publish_seconds", "publish time (round 1)", first.published.seconds, "s")
    result.add("prefetch", "broker prefetch of both consumers", PREFETCH)
    _bare_figures(result, first.bare, n)
    _service_figures(result, first.drain, n)
    for number, round_ in enumerate(rounds, 1):
        order = "bare first" if number % 2 else "service first"
        result.add(
            f"bare_rate_round{number}",
            f"bare stomp.py consumer rate, round {number} ({order})",
            round_.bare.get("rate"),
            "msg/s",
        )
        result.add(
            f"service_rate_round{number}",
            f"service rate, round {number} ({order})",
            round_.drain.rate(),
            "msg/s",
        )
    bare_rate = _mean([r.bare.get("rate") for r in rounds])
    service_rate = _mean([r.drain.rate() for r in rounds])
    result.add("bare_rate", "bare stomp.py consumer rate (mean of the rounds)", bare_rate, "msg/s")
    label = "service rate, first poll to N-th message (mean of the rounds)"
    result.add("service_rate", label, service_rate, "msg/s")
    ratio = service_rate / bare_rate if service_rate and bare_rate else None
    result.add("service_to_bare", "service / bare (same run, mean rates)", ratio, "x")
    result.target("service_to_bare", "service rate / bare stomp.py rate", ratio, ">=", 0.8, "x")
    if flavour == "activemq":
        result.target("service_rate", "service rate", service_rate, ">=", 10_000, "msg/s")
    _cpu_figures(result, first.bare, first.drain, n)
    if flavour == "activemq":
        _prefetch_note(result)
    for round_ in rounds:
        _delivery_notes(result, corpus, round_.bare, round_.drain)
    result.details["service_timeline"] = first.drain.timeline[
        :: max(1, len(first.drain.timeline) // 200)
    ]


def _receive_figures(result: MeasurementResult, cpu_us: dict[str, float]) -> None:
    label = "receive path in-process, CPU per message: stomp.py's reader (the bare consumer's)"
    result.add("receive_alone_stomp_py", label, cpu_us["stomp_py"], "µs")
    label = "receive path in-process, CPU per message: nettel's (stomp_transport)"
    result.add("receive_alone_nettel", label, cpu_us["nettel"], "µs")


def _mean(values: list[float | None]) -> float | None:
    """Mean of the values, or None when any is missing (a drain that did not finish)."""
    return None if any(v is None for v in values) else sum(values) / len(values)  # type: ignore[arg-type]


def _cpu_figures(result: MeasurementResult, bare: dict, drain: Drain, n: int) -> None:
    """CPU time per message of each process in both runs: where the two cores went."""
    per_message = 1e6 / n
    result.add(
        "cpu_bare_broker",
        "CPU per message, bare run: broker",
        bare.get("broker_cpu", 0) * per_message,
        "µs",
    )
    result.add(
        "cpu_bare_consumer",
        "CPU per message, bare run: bare consumer",
        bare.get("cpu", 0) * per_message,
        "µs",
    )
    first, last = drain.cpu_first, drain.cpu_reached
    if first is None or last is None or drain.first_poll is None or drain.reached is None:
        return
    messages = drain.reached[1] - drain.first_poll[1]
    if messages <= 0:
        return
    for key, label in [
        ("broker", "service run: broker"),
        ("receiving", "service run: service process (receive, apply, cycle, HTTP)"),
        ("parsers", "service run: parser processes"),
    ]:
        used = getattr(last, key) - getattr(first, key)
        result.add(f"cpu_service_{key}", f"CPU per message, {label}", used / messages * 1e6, "µs")


def _bare_figures(result: MeasurementResult, bare: dict, n: int) -> float | None:
    received = bare.get("received", 0)
    result.add("bare_received", "bare consumer: frames received", received)
    result.add("bare_redelivered", "bare consumer: frames beyond N", received - n)
    repeated = received - bare.get("unique", 0)
    result.add("bare_repeated_ids", "bare consumer: repeated message-ids", repeated)
    return bare.get("rate")


def _service_figures(result: MeasurementResult, drain: Drain, n: int) -> float | None:
    result.add("service_received", "service: messages received", drain.received)
    result.add("service_redelivered", "service: messages beyond N", drain.received - n)
    result.add("service_datapoints_applied", "service: datapoints applied", drain.applied)
    result.add("service_rejected", "service: rejected (any reason)", drain.rejected)
    rate = drain.rate()
    label = "service rate (broker connected to N-th message; round 1)"
    result.add("service_rate_from_connect", label, drain.rate_from_connect(), "msg/s")
    result.add("service_cycles", "matrix cycles during the drain", drain.cycles)
    label = "mean cycle time during the drain"
    result.add("service_cycle_mean", label, drain.cycle_seconds_mean, "s")
    return rate


def _prefetch_note(result: MeasurementResult) -> None:
    which = "the service's default" if PREFETCH == DEFAULT_PREFETCH else "not the default"
    result.notes.append(
        f"Both consumers use prefetch {PREFETCH:,} ({which}): on this broker a durable "
        "subscription draining a stored backlog with prefetch 5,000 or 20,000 got duplicates and "
        "missed messages (up to a quarter at 20,000), bare stomp.py consumer and service alike; "
        "with 1,000 or 2,000 every message arrived exactly once."
    )


def _delivery_notes(result: MeasurementResult, corpus: Corpus, bare: dict, drain: Drain) -> None:
    n = len(corpus.messages)
    if drain.received != n or drain.applied != corpus.datapoints or bare.get("unique") != n:
        result.notes.append(
            f"Delivery was not exact: the service received {drain.received:,} frames for {n:,} "
            f"messages and applied {drain.applied:,} of {corpus.datapoints:,} datapoints; the "
            f"bare consumer got {bare.get('unique', 0):,} distinct messages"
        )


def _profile_details(result: MeasurementResult, spy: dict | None, alone: dict) -> None:
    tables = []
    if spy is not None:
        title = f"py-spy, service during the drain ({spy['samples']:,} samples holding the GIL)"
        tables.append(thread_table(f"{title}: threads", spy))
        tables.append(profile_table(f"{title}: functions", spy))
        result.details["py_spy"] = spy
    else:
        result.notes.append(
            "py-spy was not available or recorded nothing; see logs/ingest-profile.log"
        )
    tables.append(profile_table("cProfile, parse+apply in-process (20,000 messages)", alone))
    result.details["cprofile_pipeline"] = alone
    result.details["tables"] = tables
