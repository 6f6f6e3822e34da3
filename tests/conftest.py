"""Shared fixtures: real brokers (ActiveMQ, RabbitMQ) and a real `nettel serve` process.

- `activemq` (session): one private broker for the whole run; `activemq.brokers` is the
  `127.0.0.1:PORT` string for `--brokers`. Do not kill it; use `activemq_factory` for fault tests.
- `activemq_factory` (function): `activemq_factory()` starts another private broker in the
  test's tmp dir (kill/restart freely); all are stopped at teardown. Both are `short_lived`
  (their JVMs compile with C1 only: a test's seconds of broker use cost ~20 % less CPU).
- `rabbitmq`, `rabbitmq_factory`: the same for private RabbitMQ nodes with the STOMP plugin
  (`devtools.rabbitmq`; vhost `/`).
- `stomp_broker` (session) and `broker_factory` (function): parametrized over both brokers
  (ids `activemq`, `rabbitmq`; the RabbitMQ case is marked `rabbitmq`), for tests that must
  hold on either; `.flavour` says which one a test got.
- `nettel_service` (function): `nettel_service(brokers, *extra_args, env=None)` starts
  `python -m service serve` on a free port, waits for `GET /healthz` == 200 and returns a
  `ServiceProcess` (`.url`, `.process`, `.log_path`, `.log_text()`; from
  `devtools.service_process`, shared with the benchmarks); stopped at teardown.
- `clock` (function): the one test clock (`tests.clock.TestClock`, at 1000.0 until moved).
- `memory_broker` (function): an in-memory broker (`service.broker.memory_broker`) as ActiveMQ;
  `flavoured_memory_broker` the same as ActiveMQ, then as RabbitMQ. The connection contract
  (tests/broker/test_connection_contract.py) proves it acts as the real ones; tests that need
  no wire run on it, not on a broker process.
- `memory_service` (function): `memory_service(broker, *flags, env=None)` builds `nettel serve
  FLAGS` in this process over the in-memory `broker` (`tests.in_memory_service`), starts it,
  serves its HTTP API on a free port and returns it (`.url`, `.runtime`, `.log_text()`,
  `.publisher()`); stopped at teardown.
- `free_port()`: plain helper (also importable from `devtools.activemq`).
- under pytest-xdist each worker starts on its part of the slow files
  (`pytest_collection_modifyitems`).
- every test leaves the root logger without the handlers it added, at its level (`nettel`'s command
  functions install a handler on the sys.stderr of the moment: a test's capture, closed after
  it; a later record, as py4j's at garbage collection, then failed into another test's stderr).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from devtools.activemq import ActiveMQProcess, free_port, start_activemq
from devtools.rabbitmq import RabbitMQProcess, start_rabbitmq
from devtools.service_process import ServiceProcess, launch_service, wait_for_status
from service.broker.memory_broker import MemoryBroker
from tests.clock import TestClock

if TYPE_CHECKING:
    from tests.in_memory_service import InMemoryService

SERVICE_START_TIMEOUT = 30.0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist, each worker's first share of tests starts with its part of the slow
    files (whole, so their file-scoped fixtures start once), the rest filled up with quick
    tests in their order. Worksteal hands worker i the i-th contiguous share and lets idle
    workers take only the ends of others' queues (never the last two tests): left in place, the
    longest broker tests ended one worker's share and the run's last half minute had one of
    four workers busy."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2:
        return
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    slow_counts = {path: sum(map(is_slow, tests)) for path, tests in files.items()}
    lanes: list[list[pytest.Item]] = [[] for _ in range(workers)]
    lane_slow = [0] * workers
    for path in sorted((p for p in files if slow_counts[p]), key=lambda p: -slow_counts[p]):
        lane = lane_slow.index(min(lane_slow))
        lanes[lane].extend(files[path])
        lane_slow[lane] += slow_counts[path]
    quick = [test for path, tests in files.items() if not slow_counts[path] for test in tests]
    left = len(items)
    for number, lane in enumerate(lanes):
        share = left // (workers - number)  # as worksteal splits the tests at the start
        taken = max(0, share - len(lane))
        lane.extend(quick[:taken])
        del quick[:taken]
        left -= len(lane)
    items[:] = [test for lane in lanes for test in lane] + quick


def is_slow(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None


@pytest.fixture(autouse=True)
def root_logger_restored() -> Iterator[None]:
    """Handlers a test added to the root logger (pytest's own aside) go; its level is reset."""
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in before and not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture
def clock() -> TestClock:
    """A clock at 1000.0 that moves only when the test sets `clock.now` or calls `advance`."""
    return TestClock()


@pytest.fixture
def memory_broker() -> MemoryBroker:
    """An in-memory broker that acts as ActiveMQ does."""
    return MemoryBroker("activemq")


@pytest.fixture(params=["activemq", "rabbitmq"], ids=["memory-activemq", "memory-rabbitmq"])
def flavoured_memory_broker(request: pytest.FixtureRequest) -> MemoryBroker:
    """An in-memory broker that acts as ActiveMQ does, then one that acts as RabbitMQ does."""
    return MemoryBroker(request.param)


@pytest.fixture
def memory_service() -> Iterator[Callable[..., InMemoryService]]:
    """`memory_service(broker, *flags, env=None)`: `nettel serve FLAGS` in this process over the
    in-memory `broker`, started, its HTTP API served; stopped at teardown."""
    from tests.in_memory_service import serve_in_memory  # the runtime's imports, only if used

    with ExitStack() as running:

        def start(
            broker: MemoryBroker, *flags: str, env: Mapping[str, str] | None = None
        ) -> InMemoryService:
            return running.enter_context(serve_in_memory(broker, *flags, env=env))

        yield start


@pytest.fixture(scope="session")
def activemq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActiveMQProcess]:
    """One private ActiveMQ broker (STOMP on a free port) for the whole test session."""
    broker = start_activemq(
        tmp_path_factory.mktemp("activemq"), stomp_port=free_port(), short_lived=True
    )
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def activemq_factory(tmp_path: Path) -> Iterator[Callable[..., ActiveMQProcess]]:
    """Start extra private brokers (free ports, tmp dir) that a test may kill and restart."""
    started: list[ActiveMQProcess] = []

    def start(**kwargs: object) -> ActiveMQProcess:
        base_dir = tmp_path / f"activemq-{len(started)}"
        broker = start_activemq(
            base_dir,
            stomp_port=free_port(),
            short_lived=True,
            **kwargs,  # type: ignore[arg-type]
        )
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMQProcess]:
    """One private RabbitMQ node (STOMP on a free port) for the whole test session."""
    broker = start_rabbitmq(tmp_path_factory.mktemp("rabbitmq"), stomp_port=free_port())
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def rabbitmq_factory(tmp_path: Path) -> Iterator[Callable[..., RabbitMQProcess]]:
    """Start extra private RabbitMQ nodes (free ports, tmp dir) to kill and restart."""
    started: list[RabbitMQProcess] = []

    def start(**kwargs: object) -> RabbitMQProcess:
        base_dir = tmp_path / f"rabbitmq-{len(started)}"
        broker = start_rabbitmq(base_dir, stomp_port=free_port(), **kwargs)  # type: ignore[arg-type]
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


BROKERS = [
    pytest.param("activemq", id="activemq"),
    pytest.param("rabbitmq", id="rabbitmq", marks=pytest.mark.rabbitmq),
]


@pytest.fixture(scope="session", params=BROKERS)
def stomp_broker(request: pytest.FixtureRequest) -> ActiveMQProcess | RabbitMQProcess:
    """The session's ActiveMQ broker, then its RabbitMQ node: tests using it run on both."""
    broker: ActiveMQProcess | RabbitMQProcess = request.getfixturevalue(request.param)
    return broker


@pytest.fixture(params=BROKERS)
def broker_factory(
    request: pytest.FixtureRequest,
) -> Callable[..., ActiveMQProcess | RabbitMQProcess]:
    """`activemq_factory`, then `rabbitmq_factory`: fault tests using it run on both."""
    factory: Callable[..., ActiveMQProcess | RabbitMQProcess]
    factory = request.getfixturevalue(f"{request.param}_factory")
    return factory


@pytest.fixture
def nettel_service(tmp_path: Path) -> Iterator[Callable[..., ServiceProcess]]:
    """Start `python -m service serve --brokers BROKERS --listen 127.0.0.1:<free>` and wait
    until it is healthy: `nettel_service(activemq.brokers, "--interval", "1", env={...})`."""
    started: list[ServiceProcess] = []

    def start(
        brokers: str,
        *extra_args: str,
        env: Mapping[str, str] | None = None,
        timeout: float = SERVICE_START_TIMEOUT,
    ) -> ServiceProcess:
        log_path = tmp_path / f"nettel-serve-{len(started)}.log"
        service = launch_service(brokers, extra_args, log_path, env)
        started.append(service)
        wait_for_status(service, "/healthz", timeout=timeout, interval=0.2)
        return service

    yield start
    for service in started:
        service.stop()
