"""The short profile end to end over a small mesh: each rule, its windows, and the groupings."""

from __future__ import annotations

import numpy as np
import pytest

from service.alarms.engine import AlarmRules
from service.alarms.records import AlarmKind
from service.parse.records import MeasurementKind, ParsedMessage
from tests.alarms.mesh import BASE_MS, START, Judge, Mesh

#: Minutes of calm before a fault: the delay baseline takes minutes 30 evaluations old, and
#: needs 10 of them.
WARM = 45


def settled_at(minute: int) -> float:
    """When the cycle that judges `minute` runs (settle 30 s, as `Mesh.view`)."""
    return (minute + 1) * 60 + 31.0


def test_a_calm_mesh_raises_nothing() -> None:
    judge = Judge(Mesh())
    judge.calm(range(START, START + 60))
    assert judge.events == []


def test_complete_loss_opens_after_three_minutes_and_closes_after_five_clean() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    judge.calm(range(START, START + WARM))
    fault = START + WARM
    loss = np.zeros(len(mesh))
    loss[0] = 1.0
    for minute in range(fault, fault + 6):
        judge.minute(minute, loss=loss)
    (opened,) = judge.opened()
    alarm = opened.alarm
    assert alarm.kind is AlarmKind.COMPLETE_PACKET_LOSS
    assert alarm.subject == "ps0.site0.example.org -> ps0.site1.example.org"
    assert alarm.links == (("10.0.0.1", "10.0.1.1"),)
    assert alarm.sites == ("SITE-0", "SITE-1")
    assert alarm.started_at == fault * 60
    assert alarm.opened_at == settled_at(fault + 2)  # the third minute of loss
    assert dict(alarm.evidence) == {"minutes": 3, "loss": 1.0, "threshold": 1.0}
    recovered = fault + 6
    judge.calm(range(recovered, recovered + 5))
    (closed,) = judge.closed()
    assert closed.alarm.id == alarm.id
    assert closed.alarm.ended_at == settled_at(recovered + 4)  # the fifth clean minute


def test_two_minutes_of_loss_or_a_broken_run_raise_nothing() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    loss = np.zeros(len(mesh))
    loss[3] = 0.05
    pattern = [loss, loss, 0.0, loss, loss, 0.0, loss, loss]
    for offset, minute_loss in enumerate(pattern):
        judge.minute(START + offset, loss=minute_loss)
    assert judge.events == []


def test_windows_are_configurable() -> None:
    mesh = Mesh()
    judge = Judge(mesh, AlarmRules(open_minutes=1, close_minutes=1))
    loss = np.zeros(len(mesh))
    loss[3] = 0.05
    judge.minute(START, loss=loss)
    judge.minute(START + 1)
    assert [event.action for event in judge.events] == ["open", "close"]


def test_high_loss_with_the_delay_raised_is_congestion_not_a_loss_fault() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    judge.calm(range(START, START + WARM))
    loss, median = np.zeros(len(mesh)), np.full(len(mesh), BASE_MS)
    loss[[1, 2]] = 0.05
    median[2] = BASE_MS + 30  # a full buffer: the loss comes with queueing delay
    for minute in range(START + WARM, START + WARM + 4):
        judge.minute(minute, loss=loss, median=median, std=np.where(median > BASE_MS, 5.0, 0.2))
    assert [(e.alarm.kind, e.alarm.links) for e in judge.opened()] == [
        (AlarmKind.HIGH_PACKET_LOSS, (("10.0.0.1", "10.0.2.1"),))
    ]


def test_a_delay_step_raises_high_delay_against_the_baseline() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    judge.calm(range(START, START + WARM))
    median = np.full(len(mesh), BASE_MS)
    median[4] = BASE_MS + 30
    for minute in range(START + WARM, START + WARM + 5):
        judge.minute(minute, median=median)
    (opened,) = judge.opened()
    evidence = opened.alarm.evidence
    assert opened.alarm.kind is AlarmKind.HIGH_DELAY
    assert opened.alarm.opened_at == settled_at(START + WARM + 4)
    assert evidence["delay_ms"] == BASE_MS + 30
    assert evidence["baseline_mean_ms"] == pytest.approx(BASE_MS)
    # 1.5 x the baseline's p95, which the sketch places within its bin (8 %) of 20 ms
    assert 1.5 * BASE_MS <= evidence["threshold_ms"] <= 1.5 * BASE_MS * 1.08


def test_a_delay_rise_with_a_queue_s_signs_is_not_a_delay_fault() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    judge.calm(range(START, START + WARM))
    median, std = np.full(len(mesh), BASE_MS), np.full(len(mesh), 0.2)
    median[4], std[4] = BASE_MS + 30, 5.0
    for minute in range(START + WARM, START + WARM + 8):
        judge.minute(minute, median=median, std=std)
    assert judge.events == []


def test_a_site_cut_off_gives_one_alarm_not_one_per_link() -> None:
    mesh = Mesh(sites=6)
    judge = Judge(mesh)
    judge.calm(range(START, START + 10))
    cut = mesh.rows(lambda s, d: 2 in (s, d))
    for minute in range(START + 10, START + 14):
        judge.minute(minute, silent=cut)
    (opened,) = judge.opened()
    alarm = opened.alarm
    assert (alarm.kind, alarm.subject) == (AlarmKind.LINK_SILENT, "SITE-2")
    assert len(alarm.links) == 2 * (6 - 1)
    assert len(alarm.hosts) == 6 and "ps0.site2.example.org" in alarm.hosts
    assert alarm.evidence["peer_sites"] == 5
    assert alarm.started_at == (START + 10) * 60


def test_a_mesh_the_service_stops_hearing_is_not_silent() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    judge.calm(range(START, START + 5))
    for minute in range(START + 5, START + 12):
        judge.minute(minute, silent=np.arange(len(mesh)))
    assert judge.events == []


def test_a_firewall_is_one_alarm_for_the_site_its_host_s_links_out_untouched() -> None:
    mesh = Mesh(sites=12)
    judge = Judge(mesh)
    into = mesh.rows(lambda s, d: d == 0)
    loss = np.zeros(len(mesh))
    loss[into] = 1.0
    for minute in range(START, START + 3):
        judge.minute(minute, loss=loss)
    (opened,) = judge.opened()
    alarm = opened.alarm
    assert (alarm.kind, alarm.subject) == (AlarmKind.FIREWALL_ISSUE, "SITE-0")
    assert alarm.evidence["source_hosts"] == 11
    assert len(alarm.links) == 11


def test_high_loss_to_five_sites_is_one_alarm_for_the_host() -> None:
    mesh = Mesh(sites=7, hosts=2)  # ps0 and ps1 at each site: the alarm names the host
    judge = Judge(mesh)
    host = mesh.host_names.index("ps1.site3.example.org")
    touching = mesh.rows(lambda s, d: host in (s, d))
    loss = np.zeros(len(mesh))
    loss[touching] = 0.05
    for minute in range(START, START + 3):
        judge.minute(minute, loss=loss)
    (opened,) = judge.opened()
    alarm = opened.alarm
    assert (alarm.kind, alarm.subject) == (
        AlarmKind.HIGH_PACKET_LOSS_MULTIPLE,
        "ps1.site3.example.org",
    )
    assert len(alarm.links) == len(touching) == 2 * 13
    assert alarm.evidence["peer_sites"] == 6


def test_high_loss_on_a_few_links_gives_one_alarm_each() -> None:
    mesh = Mesh(sites=7)
    judge = Judge(mesh)
    loss = np.zeros(len(mesh))
    loss[mesh.rows(lambda s, d: s == 0 and d in (1, 2))] = 0.05
    for minute in range(START, START + 3):
        judge.minute(minute, loss=loss)
    assert sorted(e.alarm.subject for e in judge.opened()) == [
        "ps0.site0.example.org -> ps0.site1.example.org",
        "ps0.site0.example.org -> ps0.site2.example.org",
    ]
    assert {e.alarm.kind for e in judge.opened()} == {AlarmKind.HIGH_PACKET_LOSS}


def test_a_clock_ahead_raises_a_clock_alarm_and_no_delay_alarms() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    judge.calm(range(START, START + WARM))
    median = np.full(len(mesh), BASE_MS)
    median[mesh.rows(lambda s, d: s == 1)] = BASE_MS - 150  # out of the host: read short
    median[mesh.rows(lambda s, d: d == 1)] = BASE_MS + 150  # into it: read long
    for minute in range(START + WARM, START + WARM + 8):
        judge.minute(minute, median=median)
    (opened,) = judge.opened()
    alarm = opened.alarm
    assert (alarm.kind, alarm.subject) == (AlarmKind.LARGE_CLOCK_CORRECTION, "SITE-1")
    assert alarm.hosts == ("ps0.site1.example.org",)
    assert alarm.evidence["correction_ms"] == -150.0
    assert alarm.evidence["negative_delay_links"] == 5


def test_sustained_congestion_needs_the_probability_for_ten_minutes() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    probability = np.full(len(mesh), 0.1)
    probability[7] = 0.95
    for minute in range(START, START + 10):
        judge.minute(minute, probability=probability)
        assert (judge.opened() != []) == (minute == START + 9)
    (opened,) = judge.opened()
    assert opened.alarm.kind is AlarmKind.SUSTAINED_CONGESTION
    assert dict(opened.alarm.evidence) == {
        "minutes": 10,
        "congestion_probability": 0.95,
        "threshold": 0.9,
    }


def test_a_delay_step_is_not_congestion_even_when_a_model_reads_it_so() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    judge.calm(range(START, START + WARM))
    median = np.full(len(mesh), BASE_MS)
    median[7] = BASE_MS + 5  # raised, without a queue's spread or loss, below the threshold
    probability = np.where(median > BASE_MS, 0.99, 0.1)
    for minute in range(START + WARM, START + WARM + 12):
        judge.minute(minute, median=median, probability=probability)
    assert judge.events == []


def test_rows_follow_their_links_when_the_state_retires_some() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    judge.calm(range(START, START + 3))
    loss = np.zeros(len(mesh))
    loss[-1] = 1.0
    for minute in range(START + 3, START + 6):
        judge.minute(minute, loss=loss)
    (opened,) = judge.opened()
    quiet = np.array([0])  # the first link stops reporting and is retired: later rows move up
    for minute in range(START + 6, START + 8):
        judge.minute(minute, loss=loss, silent=quiet)
    assert mesh.state.retire_idle((START + 6) * 60) == 1
    for minute in range(START + 8, START + 10):
        judge.minute(minute, loss=loss, silent=quiet)
    assert judge.events == [opened]  # still open, nothing else raised
    for minute in range(START + 10, START + 15):
        judge.minute(minute, silent=quiet)
    (closed,) = judge.closed()  # the latch moved with its link: five clean minutes close it
    assert (closed.alarm.id, closed.at) == (opened.alarm.id, settled_at(START + 14))


def test_a_link_that_never_reported_latency_is_not_silent() -> None:
    """A link known only from throughput tests or traceroutes has no latency test to lose."""
    mesh = Mesh(sites=6)
    judge = Judge(mesh)
    (never,) = mesh.rows(lambda s, d: (s, d) == (1, 4))
    tested = ParsedMessage(
        MeasurementKind.THROUGHPUT, mesh.endpoints[never], throughputs=[(START * 60, 9.4e9)]
    )
    mesh.state.apply_batch([tested], START * 60 + 63)  # the link's row, from a test alone
    for minute in range(START, START + 12):
        judge.minute(minute, silent=[never])
    assert judge.events == []
