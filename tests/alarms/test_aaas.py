"""`--alarm-profile aaas`: each UTC day judged once, over the whole day, against the days before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.alarms.aaas import DAY_MINUTES, AaasEngine
from service.alarms.baseline import GAMMA
from service.alarms.records import AlarmKind
from service.alarms.service import AlarmService
from service.alarms.store import AlarmStore
from service.config import Settings
from tests.alarms.mesh import BASE_MS, Judge, Mesh

DAY = 20_139 * DAY_MINUTES  # the first minute of a UTC day


def aaas_judge(mesh: Mesh) -> Judge:
    judge = Judge(mesh)
    judge.engine = AaasEngine(judge.book, judge.engine.rules)
    return judge


def test_a_day_is_judged_once_on_its_mean_loss() -> None:
    mesh = Mesh(sites=3)
    judge = aaas_judge(mesh)
    for minute in range(DAY, DAY + DAY_MINUTES):
        loss = np.zeros(len(mesh))
        loss[0] = 0.05 if minute < DAY + 60 else 0.0  # an hour of 5 %: 0.2 % over the day
        loss[1] = 0.03
        loss[2] = 1.0
        judge.minute(minute, loss=loss)
        if minute < DAY + DAY_MINUTES - 1:
            assert judge.events == []  # nothing before the day has ended
    opened = {e.alarm.kind: e.alarm for e in judge.opened()}
    assert set(opened) == {AlarmKind.HIGH_PACKET_LOSS, AlarmKind.COMPLETE_PACKET_LOSS}
    high = opened[AlarmKind.HIGH_PACKET_LOSS]
    assert high.links == ((mesh.ips[0], mesh.ips[2]),)
    assert high.started_at == DAY * 60
    assert high.opened_at == (DAY + DAY_MINUTES) * 60 + 31.0
    assert dict(high.evidence) == {"loss": 0.03, "threshold": 0.02, "measurements": 1440}
    # the next day is clean: both close when it is judged, and not before
    for minute in range(DAY + DAY_MINUTES, DAY + 2 * DAY_MINUTES):
        judge.minute(minute)
    assert {e.alarm.id for e in judge.closed()} == {a.id for a in opened.values()}
    assert {e.at for e in judge.closed()} == {(DAY + 2 * DAY_MINUTES) * 60 + 31.0}


def test_a_day_s_delay_p95_is_judged_against_the_days_before() -> None:
    mesh = Mesh(sites=3)
    judge = aaas_judge(mesh)
    for minute in range(DAY, DAY + DAY_MINUTES):
        judge.minute(minute)  # day one: the baseline
    median = np.full(len(mesh), BASE_MS)
    median[3] = 2 * BASE_MS
    for minute in range(DAY + DAY_MINUTES, DAY + 2 * DAY_MINUTES):
        judge.minute(minute, median=median)
    (opened,) = judge.opened()
    evidence = opened.alarm.evidence
    assert opened.alarm.kind is AlarmKind.HIGH_DELAY
    assert opened.alarm.started_at == (DAY + DAY_MINUTES) * 60
    assert evidence["measurements"] == DAY_MINUTES
    assert 2 * BASE_MS / GAMMA <= evidence["delay_p95_ms"] <= 2 * BASE_MS * GAMMA
    assert 1.5 * BASE_MS <= evidence["threshold_ms"] <= 1.5 * BASE_MS * GAMMA
    assert evidence["baseline_mean_ms"] == pytest.approx(BASE_MS)


def test_a_restart_mid_day_keeps_the_day_so_far(tmp_path: Path) -> None:
    mesh = Mesh(sites=3)
    judge = aaas_judge(mesh)
    loss = np.zeros(len(mesh))
    loss[1] = 0.03
    for minute in range(DAY, DAY + 100):
        judge.minute(minute, loss=loss)
    AlarmStore(tmp_path).save(judge.book, judge.engine)
    restarted = aaas_judge(mesh)
    AlarmStore(tmp_path).load(restarted.book, restarted.engine)
    for name, array in judge.engine.row_arrays.items():
        assert np.array_equal(restarted.engine.row_arrays[name], array), name
    for name, array in judge.engine.host_arrays.items():
        assert np.array_equal(restarted.engine.host_arrays[name], array), name
    assert restarted.engine.row_arrays["day/loss_count"][1] == 100


def test_the_service_raises_alarms_with_the_profile_asked_for(tmp_path: Path) -> None:
    service = AlarmService.build(Settings(alarm_profile="aaas", state_dir=tmp_path))
    assert service is not None and isinstance(service.engine, AaasEngine)
    assert AlarmService.build(Settings(alarms=False)) is None
