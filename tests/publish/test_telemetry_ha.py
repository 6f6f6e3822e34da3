"""The telemetry publisher of an --ha-group replica: publishes only while its election says so, a
takeover starts from the whole matrix, and a batch queued before a step-down is dropped."""

from __future__ import annotations

from devtools.waiting import wait_for
from service.broker.link import BrokerAccess
from service.publish.telemetry import TelemetryPublisher
from tests.publish.support import host_link, make_matrix

TOPIC = "/topic/telemetry.perfsonar"
A = host_link("192.0.2.1", "192.0.2.2", cost=0.1)
B = host_link("192.0.2.3", "192.0.2.4", cost=0.2)


class Election:
    def __init__(self) -> None:
        self.leader = False

    def __call__(self) -> bool:
        return self.leader


def publisher(election: Election) -> TelemetryPublisher:
    """Never started: its queue shows what would be sent."""
    return TelemetryPublisher(BrokerAccess([("127.0.0.1", 9)]), TOPIC, publishes=election)


def taken(publisher: TelemetryPublisher) -> list:
    batch = publisher._queue.peek(0)
    if batch is None:
        return []
    publisher._queue.done(batch)
    return batch.links


def test_standby_queues_nothing_and_a_takeover_sends_every_link():
    election = Election()
    telemetry = publisher(election)
    first = make_matrix([A, B])
    telemetry.observe(None, first)
    assert taken(telemetry) == []
    election.leader = True
    telemetry.observe(first, first)  # nothing changed, yet the new leader sends all
    assert taken(telemetry) == [A, B]
    changed = make_matrix([A | {"cost": 0.3}, B])
    telemetry.observe(first, changed)
    assert taken(telemetry) == [A | {"cost": 0.3}]


def test_a_leader_that_steps_down_and_comes_back_sends_every_link_again():
    election = Election()
    election.leader = True
    telemetry = publisher(election)
    matrix = make_matrix([A, B])
    telemetry.observe(None, matrix)
    assert taken(telemetry) == [A, B]
    election.leader = False
    telemetry.observe(matrix, matrix)
    election.leader = True
    telemetry.observe(matrix, matrix)
    assert taken(telemetry) == [A, B]


def test_a_batch_queued_before_a_step_down_is_dropped_unsent():
    election = Election()
    election.leader = True
    telemetry = publisher(election)
    telemetry.observe(None, make_matrix([A]))
    election.leader = False
    telemetry._loop.start()  # the sender thread, without a broker connection
    wait_for(
        lambda: telemetry._queue.peek(0) is None, 5, 0.05, what="the queued batch dropped unsent"
    )
    telemetry._loop.stop(5)
