"""Fixtures for the publishers' end-to-end tests: the service over an in-memory broker, a producer.

`bus` is the broker they use: the in-memory broker as ActiveMQ here; a test module may override
it (test_telemetry.py runs on it as RabbitMQ too)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from devtools.stomp_client import BrokerClient
from devtools.waiting import wait_for
from tests.integration.wire import get_json

#: A plain (non-durable) subscription: what is published before it exists is not delivered.
SERVE_ARGS = ("--interval", "1", "--model", "none", "--subscription", "plain")


@pytest.fixture
def bus(memory_broker):
    return memory_broker


@pytest.fixture
def publisher(bus) -> Iterator[BrokerClient]:
    producer = BrokerClient(bus.access())
    yield producer
    producer.close()


@pytest.fixture
def serve(bus, memory_service, tmp_path) -> Callable:
    """`serve(*extra_args)`: the service with SITE-A and SITE-B as topology, once ready (its
    subscription confirmed: a plain topic subscription misses what is published before)."""
    topology = tmp_path / "topology.yaml"
    topology.write_text("SITE-A: [ps-latency.site-a.example.org]\nSITE-B: [198.51.100.20]\n")

    def start(*extra_args: str):
        service = memory_service(bus, *SERVE_ARGS, "--topology", str(topology), *extra_args)
        wait_for(lambda: get_json(f"{service.url}/readyz"), what="subscribed (plain topics)")
        return service

    return start
