"""`nettel serve` in this process over an in-memory broker, for behaviour tests that need no wire.

`serve_in_memory(broker, *flags, env=...)` reads the settings from the same flags and `NETTEL_*`
environment as `nettel serve`, builds the runtime with `build_runtime(settings,
broker_connector=broker.connector)` (every broker connection of the service, the subscription,
the election and the telemetry publisher, goes to `broker`), starts it as `nettel serve` does and
serves its HTTP API on a free port of 127.0.0.1 until the block ends. What `nettel serve` adds
around it (the listener bound before anything connects, the front door's limits, signals: SIGHUP
is `runtime.reload()`) belongs to the tests that run the real process.
"""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from unittest import mock

from devtools.local_http import LOCAL_HTTP
from devtools.stomp_client import BrokerClient
from devtools.waiting import wait_for
from service.broker.memory_broker import MemoryBroker
from service.cli import build_parser
from service.commands.setting_flags import given_settings
from service.config import Settings, load_settings
from service.log_format import JsonFormatter
from service.publish.app import create_app
from service.runtime import Runtime, build_runtime
from tests.publish.served_app import serve_app


@dataclass
class InMemoryService:
    """A started runtime over an in-memory broker and its HTTP API at `url`."""

    url: str
    runtime: Runtime
    broker: MemoryBroker
    #: When (time.monotonic) the service began to be built, as a process's launch.
    launched_at: float
    _log: io.StringIO
    _running: ExitStack

    def stop(self) -> None:
        """Stop the service as `nettel serve` stops (its parts in reverse), and its HTTP API."""
        self._running.close()

    def log_text(self) -> str:
        """What `nettel` logged since the service was built, one JSON object a line (as `nettel
        serve` writes it); other services of this process log into it too."""
        return self._log.getvalue()

    def ready_at(self, timeout: float = 30.0) -> float:
        """When (time.monotonic) /readyz first answered 200, polled every 0.1 s."""

        def ready() -> float | None:
            status = LOCAL_HTTP.get(f"{self.url}/readyz").status_code
            return time.monotonic() if status == 200 else None

        return wait_for(ready, timeout, what="/readyz 200")

    def publisher(self) -> BrokerClient:
        """A client of the service's broker, to publish to it."""
        return BrokerClient(self.broker.access())


def settings_of(flags: tuple[str, ...], env: Mapping[str, str] | None = None) -> Settings:
    """`nettel serve FLAGS`'s settings, with `env` added to the environment."""
    args = build_parser("serve").parse_args(["serve", *flags])
    with mock.patch.dict(os.environ, dict(env or {})):
        return load_settings(**given_settings(args, Settings))


@contextmanager
def serve_in_memory(
    broker: MemoryBroker, *flags: str, env: Mapping[str, str] | None = None
) -> Iterator[InMemoryService]:
    """The service of `nettel serve FLAGS` over `broker`, started, until the block ends."""
    launched_at = time.monotonic()
    settings = settings_of(flags, env)
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setFormatter(JsonFormatter())
    nettel = logging.getLogger("nettel")
    nettel.addHandler(handler)
    level = nettel.level
    nettel.setLevel(logging.INFO)
    try:
        with ExitStack() as running:
            runtime = build_runtime(settings, broker_connector=broker.connector)
            runtime.start()
            running.callback(runtime.stop)
            url = running.enter_context(serve_app(create_app(runtime)))
            yield InMemoryService(url, runtime, broker, launched_at, log, running)
    finally:
        nettel.removeHandler(handler)
        nettel.setLevel(level)
