"""Only a ready replica leads: two real elections of one group on the session brokers, whose
eligibility (the service's readiness) the test switches. The leader that stops being eligible
leaves the lease queue after the lease timeout, and the broker hands the lease to the other."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from devtools.waiting import wait_for
from service.broker.election import BrokerElection
from service.broker.lease import LeaseTiming, Role
from service.broker.link import BrokerAccess
from service.config import parse_address

pytestmark = pytest.mark.broker

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


def test_a_leader_that_is_not_ready_hands_the_lease_to_a_ready_replica(stomp_broker):
    group = f"e{uuid.uuid4().hex[:8]}"
    if stomp_broker.flavour == "rabbitmq":
        stomp_broker.declare_queue(f"nettel.ha.{group}", {"x-single-active-consumer": True})
    brokers = [parse_address(broker) for broker in stomp_broker.brokers.split(",")]
    access = BrokerAccess(brokers, vhost="/")  # as the service's default --broker-vhost
    ready = {"a": Switch(True), "b": Switch(False)}
    elections = {
        name: BrokerElection(access, group, replica=name, timing=TIMING, eligible=ready[name])
        for name in ready
    }
    for election in elections.values():
        election.start()
    try:
        wait_for(lambda: elections["a"].leader, timeout=15, interval=0.1, what="a leads")
        time.sleep(2 * TIMING.timeout)  # b, not ready, stays out however long
        assert elections["b"].role is Role.STANDBY and elections["a"].leader

        ready["b"].set(True)
        time.sleep(2 * TIMING.timeout)  # b joins, but the broker keeps a as the active one
        assert elections["a"].leader and elections["b"].role is Role.STANDBY

        ready["a"].set(False)
        started = time.monotonic()
        wait_for(lambda: elections["b"].leader, timeout=15, interval=0.1, what="b takes over")
        handover = time.monotonic() - started
        assert elections["a"].role is Role.STANDBY
        # a leaves after one timeout not ready; b leads one timeout after its first token
        assert 2 * TIMING.timeout <= handover < 2 * TIMING.timeout + 5.0
        transitions = elections["a"].transitions
        time.sleep(2 * TIMING.timeout)  # a, out of the queue, receives no token: no new role
        assert elections["a"].transitions == transitions and elections["b"].leader
    finally:
        for election in elections.values():
            election.stop()
