"""Private brokers for the suite (ActiveMQ; RabbitMQ for `ingest_rabbitmq`), and STOMP helpers
shared by its helper processes."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TypeVar

import stomp

from benchmarks.context import SuiteContext
from devtools.activemq import ActiveMQProcess, free_port, start_activemq
from devtools.broker_process import BrokerProcess
from devtools.rabbitmq import RabbitMQProcess, start_rabbitmq
from service.broker.flavour import Flavour
from service.ingest.stomp_source import SubscriptionSpec, subscription_target

BROKER_HEAP_MB = 1024
#: Phrases ActiveMQ logs when producer flow control or a usage limit holds producers back.
FLOW_CONTROL_PATTERNS = re.compile(
    r"flow control|Usage Manager|blocking producer|percentUsage", re.I
)


B = TypeVar("B", bound=BrokerProcess)


def private_broker(workdir: Path, name: str, logs: Path) -> AbstractContextManager[ActiveMQProcess]:
    """A fresh broker under `workdir/activemq-<name>`; its log is kept in `logs`, data deleted."""

    def start(base: Path) -> ActiveMQProcess:
        return start_activemq(base, stomp_port=free_port(), heap_mb=BROKER_HEAP_MB)

    return _private(start, workdir, f"activemq-{name}", logs)


def measurement_broker(ctx: SuiteContext, name: str) -> AbstractContextManager[ActiveMQProcess]:
    """The ActiveMQ a measurement runs against: a fresh `private_broker` of its own; at quick
    sizes the run's one broker, started by the first measurement that asks and stopped when the
    run ends (a broker start costs seconds of CPU, as much as a quick measurement's own work)."""
    if not ctx.quick:
        return private_broker(ctx.work, name, ctx.logs)
    if "activemq" not in ctx.shared:
        shared = private_broker(ctx.output, "shared", ctx.logs)
        ctx.shared["activemq"] = ctx.closing.enter_context(shared)
    broker: ActiveMQProcess = ctx.shared["activemq"]
    return nullcontext(broker)


def private_rabbitmq(
    workdir: Path, name: str, logs: Path
) -> AbstractContextManager[RabbitMQProcess]:
    """A fresh RabbitMQ node under `workdir/rabbitmq-<name>`; log kept in `logs`, data deleted."""
    return _private(
        lambda base: start_rabbitmq(base, stomp_port=free_port()), workdir, f"rabbitmq-{name}", logs
    )


@contextmanager
def _private(start: Callable[[Path], B], workdir: Path, folder: str, logs: Path) -> Iterator[B]:
    """The broker `start` runs under `workdir/<folder>`, after deleting what a previous one left
    there; its log is kept as `logs/<folder>.log` and its data deleted after."""
    base = workdir / folder
    shutil.rmtree(base, ignore_errors=True)
    broker = start(base)
    try:
        yield broker
    finally:
        broker.stop()
        logs.mkdir(parents=True, exist_ok=True)
        if broker.log_path.exists():
            shutil.copy(broker.log_path, logs / f"{folder}.log")
        shutil.rmtree(base, ignore_errors=True)


def broker_limits(broker: ActiveMQProcess) -> dict[str, str]:
    """memoryUsage / storeUsage / tempUsage limits of the generated activemq.xml, and the heap."""
    xml = broker.layout.config_file.read_text()
    limits = {
        name: match.group(1)
        for name in ("memoryUsage", "storeUsage", "tempUsage")
        if (match := re.search(rf'<{name} limit="([^"]+)"', xml))
    }
    return limits | {"heap": f"{broker.heap_mb} mb"}


def flow_control_lines(broker: ActiveMQProcess) -> list[str]:
    """Broker log lines that mention producer flow control or usage limits."""
    try:
        text = broker.log_path.read_text(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if FLOW_CONTROL_PATTERNS.search(line)]


def address(brokers: str) -> tuple[str, int]:
    host, port = brokers.rsplit(":", 1)
    return host, int(port)


def connect(
    brokers: str,
    client_id: str | None = None,
    listener: stomp.ConnectionListener | None = None,
    heartbeats: tuple[int, int] = (0, 0),
) -> stomp.Connection12:
    """A connected STOMP 1.2 connection (with `client-id` when given); raw byte bodies. Its
    `host` header is `/`: RabbitMQ's default vhost, which ActiveMQ ignores."""
    connection = stomp.Connection12(
        [address(brokers)], heartbeats=heartbeats, auto_decode=False, vhost="/"
    )
    if listener is not None:
        connection.set_listener("bench", listener)
    headers = {"client-id": client_id} if client_id else {}
    connection.connect(wait=True, headers=headers)
    return connection


def durable_subscriptions(
    client_id: str, topics: Sequence[str], prefetch: int, flavour: Flavour
) -> list[tuple[str, dict[str, str]]]:
    """(destination, SUBSCRIBE headers) of `nettel serve`'s durable subscriptions for
    `client_id` on a broker of `flavour` (ActiveMQ: subscriptions `<client_id>-<n>`; RabbitMQ:
    durable queues `<client_id>.<topic>`)."""
    spec = SubscriptionSpec(mode="durable", client_id=client_id, prefetch=prefetch)
    targets = [subscription_target(spec, topic, n, flavour) for n, topic in enumerate(topics)]
    return [(target.destination, target.headers) for target in targets]


def register_durable(
    brokers: str, client_id: str, subscriptions: Sequence[tuple[str, dict[str, str]]]
) -> None:
    """Create durable subscriptions (destination, SUBSCRIBE headers) and go offline again.

    The broker then keeps every persistent message published to them until their owner comes.
    """
    connection = connect(brokers, client_id)
    for number, (destination, headers) in enumerate(subscriptions):
        connection.subscribe(destination, id=str(number), ack="auto", headers=headers)
    time.sleep(0.2)
    connection.disconnect()
