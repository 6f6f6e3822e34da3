"""Only a ready replica leads: two elections of one group over the in-memory broker (as ActiveMQ:
an exclusive consumer; as RabbitMQ: a single-active-consumer queue), whose eligibility (the
service's readiness) the test switches. The leader that stops being eligible leaves the lease
queue after the lease timeout, and the broker hands the lease to the other. (That the real
brokers hand a lease queue over so is the connection contract's.)"""

from __future__ import annotations

import threading
import time
import uuid

from devtools.waiting import wait_for
from service.broker.election import BrokerElection
from service.broker.lease import LeaseTiming, Role

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
