"""High availability: telemetry publisher failover and client requests through HAProxy while
replicas are SIGKILLed, on ActiveMQ (this name) or RabbitMQ (`ha_failover_rabbitmq`)."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import stomp

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult, percentile
from benchmarks.support.broker import private_broker, private_rabbitmq
from benchmarks.support.corpus import build_marker_message
from devtools.broker_process import BrokerProcess
from devtools.haproxy import HAProxyProcess
from devtools.http_load import HttpLoad
from devtools.local_http import LOCAL_HTTP
from devtools.minute_feed import MinuteFeed
from devtools.rabbitmq import RabbitMQProcess
from devtools.service_process import ServiceProcess, launch_service, wait_for_status

NAME = "ha_failover"
#: Publisher failover asked for (docs/high-availability.md).
TARGET_FAILOVER_SECONDS = 15.0
METHOD = (
    "A private broker (on RabbitMQ the group's lease queue is declared with "
    "x-single-active-consumer first, as an operator would), two `nettel serve` replicas in one "
    "`--ha-group` with the default lease (2 s tokens, 6 s timeout) and cycle settings and "
    "`--model none`, each with its own client id and durable subscription, and HAProxy with the "
    "shipped deploy/haproxy/haproxy.cfg in front of them. A feed gives each of L links its "
    "datapoint of every minute, spread over the minute as perfSONAR hosts send them; T "
    "closed-loop client threads GET /costmatrix through HAProxy all along. Each of K rounds "
    "SIGKILLs the current leader (read from /readyz) and records the failover time: from the "
    "kill to the first telemetry message that arrives 0.1 s or more after it (only the new "
    "leader publishes then), and to /readyz naming the other replica leader. The killed replica "
    "is restarted on its port (same client id) and the next round waits until it is back in "
    "HAProxy. Failed requests: any non-200 or transport error through HAProxy."
)
GROUP = "bench"
TOPIC = "/topic/telemetry.bench-ha"
QUIET_AFTER_KILL = 0.1


class TelemetryArrivals(stomp.ConnectionListener):
    """Arrival times of every telemetry message."""

    def __init__(self, brokers: str) -> None:
        host, port = brokers.rsplit(":", 1)
        self.times: list[float] = []
        self._connection = stomp.Connection12([(host, int(port))], vhost="/")
        self._connection.set_listener("arrivals", self)
        self._connection.connect(wait=True)
        self._connection.subscribe(TOPIC, id="telemetry", ack="auto")

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.times.append(time.monotonic())

    def first_after(self, moment: float) -> float | None:
        return next((t for t in self.times if t >= moment), None)

    def close(self) -> None:
        self._connection.disconnect()


def marker_message(source: str, minute: int, loss: float) -> tuple[str, bytes, dict[str, str]]:
    """A link's loss datapoint of the minute before `minute` (as perfSONAR sends a minute's
    result once it has ended)."""
    message = build_marker_message(source, "10.71.0.1", minute - 60, loss)
    return message.destination, message.body, message.headers


def role(replica: ServiceProcess) -> str | None:
    try:
        answer = LOCAL_HTTP.get(f"{replica.url}/readyz", timeout=2.0).json()
        return str(answer["ha"]["role"])
    except (httpx.HTTPError, KeyError, ValueError):
        return None


def wait_until(probe: Any, timeout: float, what: str, interval: float = 0.05) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return time.monotonic()
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


@contextlib.contextmanager
def broker_for(flavour: str, work: Path, logs: Path) -> Iterator[BrokerProcess]:
    if flavour == "rabbitmq":
        with private_rabbitmq(work, "ha", logs) as node:
            node.declare_queue(f"nettel.ha.{GROUP}", {"x-single-active-consumer": True})
            yield node
    else:
        with private_broker(work, "ha", logs) as broker:
            yield broker


def run(ctx: SuiteContext) -> MeasurementResult:
    return measure(ctx, NAME, "activemq")


def measure(ctx: SuiteContext, name: str, flavour: str) -> MeasurementResult:
    """The failover rounds on `flavour`'s broker, as measurement `name`."""
    sizes = ctx.sizes
    title = f"High availability: failover on {'RabbitMQ' if flavour == 'rabbitmq' else 'ActiveMQ'}"
    result = MeasurementResult(name, title, METHOD)
    rounds, load = _failover_rounds(ctx, flavour)
    failover = [r["failover_seconds"] for r in rounds]
    result.add("links", "links fed every minute", sizes.ha_links)
    result.add("threads", "client threads through HAProxy", sizes.ha_threads)
    result.add("kills", "leader kills", len(rounds))
    for i, r in enumerate(rounds, 1):
        result.add(f"failover_{i}", f"kill {i}: publisher failover", r["failover_seconds"], "s")
    result.add("failover_p50", "publisher failover p50", statistics.median(failover), "s")
    result.add("failover_max", "publisher failover max", max(failover), "s")
    leader = statistics.median(r["leader_seconds"] for r in rounds)
    result.add("leader_p50", "kill to /readyz naming the new leader, p50", leader, "s")
    result.add("requests", "requests through HAProxy", load.requests)
    result.add("failed", "failed requests", len(load.failures))
    result.add("latency_p50", "latency p50", percentile(load.latencies, 50) * 1000, "ms")
    result.add("latency_p99", "latency p99", percentile(load.latencies, 99) * 1000, "ms")
    result.target(
        "failover_max",
        "publisher failover, worst kill",
        max(failover),
        "<=",
        TARGET_FAILOVER_SECONDS,
        "s",
    )
    result.target("failed", "failed requests through HAProxy", len(load.failures), "<=", 0)
    result.details["rounds"] = rounds
    result.details["failures"] = sorted({text for _, text in load.failures})[:10]
    return result


def _failover_rounds(ctx: SuiteContext, flavour: str) -> tuple[list[dict[str, float]], Any]:
    sizes = ctx.sizes
    work, logs = ctx.work, ctx.logs
    serve = ["--ha-group", GROUP, "--telemetry-topic", TOPIC, "--model", "none"]
    with broker_for(flavour, work, logs) as broker:
        if isinstance(broker, RabbitMQProcess):
            time.sleep(1.0)  # the node finishes importing the queue's definition
        arrivals = TelemetryArrivals(broker.brokers)
        sources = [f"10.70.{link // 250}.{link % 250 + 1}" for link in range(sizes.ha_links)]
        feed = MinuteFeed(broker.brokers, sources, marker_message).start()
        replicas: dict[str, ServiceProcess] = {}

        def launch(name: str, port: int | None = None) -> ServiceProcess:
            args = [*serve, "--client-id", f"bench-ha-{name}"]
            log = logs / f"ha-serve-{name}.log"
            replicas[name] = launch_service(broker.brokers, args, log, port=port)
            wait_for_status(replicas[name], "/readyz", timeout=120)
            return replicas[name]

        for name in ("a", "b"):
            launch(name)
        rounds: list[dict[str, float]] = []
        addresses = [(f"nettel-{n}", r.url.removeprefix("http://")) for n, r in replicas.items()]
        try:
            wait_until(lambda: any(role(r) == "leader" for r in replicas.values()), 60, "leader")
            with HAProxyProcess(work / "haproxy", addresses) as haproxy:
                load = HttpLoad(f"{haproxy.url}/costmatrix", threads=sizes.ha_threads).start()
                for kill in range(sizes.ha_kills):
                    ctx.log(f"ha_failover: kill {kill + 1} of {sizes.ha_kills}")
                    rounds.append(kill_leader(replicas, arrivals, launch))
                    time.sleep(4.0)  # back in HAProxy (rise 2 x 1 s) before the next kill
                outcome = load.stop()
        finally:
            for replica in replicas.values():
                replica.stop()
            feed.stop()
            arrivals.close()
    return rounds, outcome


def kill_leader(
    replicas: dict[str, ServiceProcess], arrivals: TelemetryArrivals, launch: Any
) -> dict[str, float]:
    """SIGKILL the leader; time the takeover; restart the killed replica on its port."""
    name = next(n for n, r in replicas.items() if role(r) == "leader")
    survivor = next(r for n, r in replicas.items() if n != name)
    killed = replicas[name]
    port = int(killed.url.rsplit(":", 1)[1])
    killed_at = time.monotonic()
    killed.kill()
    leader_at = wait_until(lambda: role(survivor) == "leader", 60, "the survivor to lead")
    published_at = wait_until(
        lambda: arrivals.first_after(killed_at + QUIET_AFTER_KILL) is not None, 60, "telemetry"
    )
    first = arrivals.first_after(killed_at + QUIET_AFTER_KILL) or published_at
    launch(name, port)
    wait_until(lambda: role(replicas[name]) == "standby", 60, "the restarted replica standby")
    return {"failover_seconds": first - killed_at, "leader_seconds": leader_at - killed_at}
