"""The HA election's rules over the in-memory broker (as ActiveMQ: an exclusive consumer; as
RabbitMQ: a single-active-consumer queue; that the real brokers hand a lease queue over so is
the connection contract's, and real replicas killed: test_ha_replicas.py):

- only a ready replica leads: two elections of one group whose eligibility (the service's
  readiness) the test switches; the leader that stops being eligible leaves the lease queue
  after the lease timeout, and the broker hands the lease to the other;
- a RabbitMQ lease queue declared without single active consumer is reported by both replicas;
- a replica given another's client id is refused with the reason logged, and not ready until
  the first one is gone.
"""

from __future__ import annotations

import threading
import time
import uuid

import httpx

from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.broker.election import BrokerElection
from service.broker.lease import LeaseTiming, Role
from service.broker.memory_broker import MemoryBroker
from tests.integration.test_ha_replicas import LEASE_ARGS, SERVE_ARGS, readiness_ha
from tests.integration.wire import get_json

TIMING = LeaseTiming(interval=0.5, timeout=1.5)


class Switch:
    """An eligibility a test turns on and off."""

    def __init__(self, on: bool) -> None:
        self._on = threading.Event()
        if on:
            self._on.set()

    def __call__(self) -> bool:
        return self._on.is_set()

    def set(self, on: bool) -> None:
        self._on.set() if on else self._on.clear()


def test_a_leader_that_is_not_ready_hands_the_lease_to_a_ready_replica(flavoured_memory_broker):
    broker, group = flavoured_memory_broker, f"e{uuid.uuid4().hex[:8]}"
    queue = f"nettel.ha.{group}"
    if broker.flavour == "rabbitmq":
        broker.declare_queue(queue, {"x-single-active-consumer": True})
    ready = {"a": Switch(True), "b": Switch(False)}
    elections = {
        name: BrokerElection(
            broker.access(), group, replica=name, timing=TIMING, eligible=ready[name]
        )
        for name in ready
    }
    for election in elections.values():
        election.start()
    try:
        wait_for(lambda: elections["a"].leader, timeout=15, interval=0.1, what="a leads")
        time.sleep(TIMING.timeout)  # proves that b, not ready, stays out: no token, no role
        assert broker.consumers(queue) == 1
        assert elections["b"].role is Role.STANDBY and elections["a"].leader

        ready["b"].set(True)
        wait_for(lambda: broker.consumers(queue) == 2, timeout=5, interval=0.05, what="b joins")
        time.sleep(TIMING.timeout)  # proves that the broker keeps a as the active one meanwhile
        assert elections["a"].leader and elections["b"].role is Role.STANDBY

        ready["a"].set(False)
        started = time.monotonic()
        wait_for(lambda: elections["b"].leader, timeout=15, interval=0.1, what="b takes over")
        handover = time.monotonic() - started
        assert elections["a"].role is Role.STANDBY and broker.consumers(queue) == 1
        # a leaves after one timeout not ready; b leads one timeout after its first token
        assert 2 * TIMING.timeout <= handover < 2 * TIMING.timeout + 5.0
        transitions = elections["a"].transitions
        time.sleep(TIMING.timeout)  # proves that a, out of the queue, gets no token: no new role
        assert elections["a"].transitions == transitions and elections["b"].leader
    finally:
        for election in elections.values():
            election.stop()


def test_a_lease_queue_without_single_active_consumer_is_reported(memory_service):
    """The operator's mistake on RabbitMQ: the queue delivers tokens round robin, so both
    replicas lead; each finds gaps in its own tokens and says so."""
    broker, group = MemoryBroker("rabbitmq"), f"t{uuid.uuid4().hex[:8]}"
    broker.declare_queue(f"nettel.ha.{group}", {})  # no x-single-active-consumer
    replicas = [
        memory_service(
            broker,
            *SERVE_ARGS,
            *LEASE_ARGS,
            *("--ha-group", group, "--client-id", f"{group}-{name}"),
            "--publish-telemetry",
            "false",
        )
        for name in ("a", "b")
    ]
    for replica in replicas:
        wait_for(
            lambda r=replica: readiness_ha(r.url).get("lease_shared"),
            timeout=20,
            what="the shared lease queue found",
        )
        assert metric_value(replica.url, "nettel_ha_lease_shared") == 1.0
    assert replicas[0].log_text().count("ha lease queue delivers to more than one consumer") == 2


def test_a_replica_sharing_a_client_id_is_refused_and_not_ready(
    flavoured_memory_broker, memory_service
):
    broker, client_id = flavoured_memory_broker, f"shared-{uuid.uuid4().hex[:8]}"
    args = ("--interval", "1", "--model", "none", "--client-id", client_id)
    first = memory_service(broker, *args)
    wait_for(lambda: get_json(f"{first.url}/readyz"), what="the first replica ready")
    second = memory_service(broker, *args)
    reason = {  # ActiveMQ refuses the CONNECT; RabbitMQ the client id's exclusive lock queue
        "activemq": f"Client: {client_id} already connected",
        "rabbitmq": f"client id {client_id} is in use by another connection",
    }[broker.flavour]
    wait_for(lambda: reason in second.log_text(), timeout=15, what="the refusal logged")
    readiness = httpx.get(f"{second.url}/readyz")
    assert readiness.status_code == 503
    assert "not connected to a broker" in readiness.json()["problems"]
    first_readiness = get_json(f"{first.url}/readyz")
    assert (first_readiness["ready"], first_readiness["problems"]) == (True, [])
    bus = next(source for source in first_readiness["sources"] if source["kind"] == "bus")
    assert bus["running"] and bus["detail"]["connected"]
    first.stop()  # the id is free again: the second replica takes it over
    wait_for(lambda: get_json(f"{second.url}/readyz"), timeout=20, what="the second ready")
