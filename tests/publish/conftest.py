"""Fixtures for the publishers' wire tests: a `nettel serve` on the session broker, a producer.

`bus` is the broker they use: ActiveMQ here; a test module may override it (test_telemetry.py
runs on RabbitMQ too)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from devtools.stomp_client import StompClient
from devtools.waiting import wait_for
from tests.integration.wire import get_json

#: A plain (non-durable) subscription, so no backlog from other tests' services reaches ours.
SERVE_ARGS = ("--interval", "1", "--model", "none", "--subscription", "plain")


@pytest.fixture
def bus(activemq):
    return activemq


@pytest.fixture
def publisher(bus) -> Iterator[StompClient]:
    producer = StompClient(bus.brokers)
    yield producer
    producer.close()


@pytest.fixture
def serve(bus, nettel_service, tmp_path) -> Callable:
    """`serve(*extra_args)`: `nettel serve` with SITE-A and SITE-B as topology, once subscribed
    (a plain topic subscription misses what is published before it exists)."""
    topology = tmp_path / "topology.yaml"
    topology.write_text("SITE-A: [ps-latency.site-a.example.org]\nSITE-B: [198.51.100.20]\n")

    def start(*extra_args: str):
        service = nettel_service(bus.brokers, *SERVE_ARGS, "--topology", str(topology), *extra_args)
        wait_for(lambda: get_json(f"{service.url}/readyz"), what="subscribed (plain topics)")
        return service

    return start
