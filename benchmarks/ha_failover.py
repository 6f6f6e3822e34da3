"""High availability: telemetry publisher failover and client requests through HAProxy while
replicas are SIGKILLed.

    python -m benchmarks.ha_failover [--kills 5] [--broker activemq|rabbitmq] [--links 120]
                                     [--threads 4] [--output out/bench] [-- SERVE FLAGS]

A private broker (on RabbitMQ the group's lease queue is declared with
x-single-active-consumer first, as an operator would), two `nettel serve` replicas in one
`--ha-group` with the default lease (2 s tokens, 6 s timeout) and cycle settings (`--model none`
unless other serve flags are given), each with its own client id and durable subscription, and
HAProxy with the shipped deploy/haproxy/haproxy.cfg in front of them. A feed gives each of
`links` links its datapoint of every minute, spread over the minute as perfSONAR hosts send
them; `threads` closed-loop clients GET /costmatrix through HAProxy all along.

Each of `kills` rounds SIGKILLs the current leader (read from /readyz) and records the failover
time: from the kill to the first telemetry message that arrives 0.1 s or more after it (only the
new leader publishes then), and to /readyz naming the other replica leader. The killed replica is
restarted on its port (same client id) and the next round waits until it is back in HAProxy.
Reported: failover p50/max, requests and failed requests through HAProxy (any non-200 or
transport error) with latency p50/p99. Prints one JSON document and writes it to
`<output>/ha_failover.json`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import stomp

from benchmarks.broker import private_broker, private_rabbitmq
from benchmarks.corpus import build_marker_message
from benchmarks.environment import REPO_ROOT, describe_environment
from benchmarks.report import percentile
from devtools.broker_process import BrokerProcess
from devtools.haproxy import HAProxyProcess
from devtools.http_load import HttpLoad
from devtools.rabbitmq import RabbitMQProcess
from devtools.service_process import ServiceProcess, launch_service, wait_for_status

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


class MinuteFeed:
    """Each link's loss datapoint of the current minute, links spread over the minute."""

    def __init__(self, brokers: str, links: int) -> None:
        host, port = brokers.rsplit(":", 1)
        self._connection = stomp.Connection12([(host, int(port))], vhost="/")
        self._connection.connect(wait=True)
        self._links = links
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> MinuteFeed:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._connection.disconnect()

    def _run(self) -> None:
        rng = random.Random(7)
        sent: dict[int, int] = {}  # link -> last minute sent
        while not self._stop.wait(0.25):
            now = time.time()
            minute = int(now // 60 * 60)
            due = int((now - minute) / 60 * self._links) + 1  # links whose turn has come
            for link in range(due):
                if sent.get(link) != minute:
                    sent[link] = minute
                    self._send(link, minute, rng.choice((0.0, 0.0, 0.02)))

    def _send(self, link: int, minute: int, loss: float) -> None:
        source = f"10.70.{link // 250}.{link % 250 + 1}"
        message = build_marker_message(source, "10.71.0.1", minute - 60, loss)
        self._connection.send(message.destination, message.body, headers=message.headers)


def role(replica: ServiceProcess) -> str | None:
    try:
        answer = httpx.get(f"{replica.url}/readyz", timeout=2.0).json()
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


def run(
    flavour: str, kills: int, links: int, threads: int, extra: list[str], output: Path
) -> dict[str, Any]:
    work, logs = output / "work", output / "logs"
    serve = ["--ha-group", GROUP, "--telemetry-topic", TOPIC, *(extra or ["--model", "none"])]
    with broker_for(flavour, work, logs) as broker:
        if isinstance(broker, RabbitMQProcess):
            time.sleep(1.0)  # the node finishes importing the queue's definition
        arrivals = TelemetryArrivals(broker.brokers)
        feed = MinuteFeed(broker.brokers, links).start()
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
                load = HttpLoad(f"{haproxy.url}/costmatrix", threads=threads).start()
                for _ in range(kills):
                    rounds.append(kill_leader(replicas, arrivals, launch))
                    time.sleep(4.0)  # back in HAProxy (rise 2 x 1 s) before the next kill
                result = load.stop()
        finally:
            for replica in replicas.values():
                replica.stop()
            feed.stop()
            arrivals.close()
    failover = [r["failover_seconds"] for r in rounds]
    return {
        "broker": flavour,
        "links": links,
        "kills": kills,
        "client_threads": threads,
        "serve_arguments": serve,
        "rounds": rounds,
        "failover_p50_seconds": statistics.median(failover),
        "failover_max_seconds": max(failover),
        "requests": result.requests,
        "failed_requests": len(result.failures),
        "failures": sorted({text for _, text in result.failures})[:10],
        "latency_p50_ms": percentile(result.latencies, 50) * 1000,
        "latency_p99_ms": percentile(result.latencies, 99) * 1000,
    }


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ha_failover")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--broker", choices=("activemq", "rabbitmq"), default="activemq")
    parser.add_argument("--links", type=int, default=120)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "out" / "bench")
    parser.add_argument("serve_flags", nargs="*", help="after --: flags for nettel serve")
    args = parser.parse_args(argv)
    result = {
        "environment": describe_environment("httpx threads", "none"),
        **run(args.broker, args.kills, args.links, args.threads, args.serve_flags, args.output),
    }
    args.output.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2)
    (args.output / "ha_failover.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
