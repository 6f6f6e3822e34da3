"""The alarms on throughput tests and traceroutes (short profile) over a small mesh: AAAS's
bandwidth rule, a path that changed and persists, destinations that traces do not reach, their
groupings, and the engine state saved before these rules existed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from service.alarms.engine import AlarmRules
from service.alarms.grouping import MINUTE_CONDITIONS, LinkCondition
from service.alarms.records import AlarmKind
from service.alarms.store import decode_engine, encode_engine
from service.parse.packet_trace import path_fingerprint
from service.parse.records import MeasurementKind, ParsedMessage, Trace, TraceHop
from service.state.throughput_state import BIN_SECONDS
from tests.alarms.mesh import START, Judge, Mesh

#: The 4-day bin holding START (the tests' "now"), and an hour into each of the five before.
NEWEST_BIN = START * 60 // BIN_SECONDS
OLD_TESTS = [(NEWEST_BIN - k) * BIN_SECONDS + 3600 for k in range(5, 0, -1)]
ROUTERS = ["198.18.0.1", "198.18.1.1", "198.18.2.1"]
OTHER_ROUTERS = ["198.18.7.1", "198.18.8.1", "198.18.9.1"]


def settled_at(minute: int) -> float:
    return (minute + 1) * 60 + 31.0


def run(judge: Judge, minute: int, messages: list[ParsedMessage] = ()) -> None:  # type: ignore[assignment]
    """One minute of calm delay and loss, `messages` (throughput tests, traces) applied, then
    the engine judges the view and the results the cycle takes with it."""
    judge.mesh.feed(minute)
    judge.mesh.state.apply_batch(list(messages), minute * 60 + 63)
    state = judge.mesh.state
    now = (minute + 1) * 60 + 31.0
    with state.frozen():
        view, results = state.view(now), state.results(now)
    probability = np.full(len(view), np.nan)
    judge.book.record(judge.engine.evaluate(view, probability, results))


def throughput(mesh: Mesh, row: int, results: dict[int, float]) -> ParsedMessage:
    return ParsedMessage(
        MeasurementKind.THROUGHPUT, mesh.endpoints[row], throughputs=sorted(results.items())
    )


def trace(mesh: Mesh, row: int, ts: int, routers: list[str], reached: bool = True) -> ParsedMessage:
    """A trace of link `row` over `routers` to its destination (or stopping before it, silent
    to TTL 30)."""
    addresses = [*routers, mesh.endpoints[row].destination] if reached else list(routers)
    hops = [TraceHop(ttl, ip, 1.0 + ttl, 64500) for ttl, ip in enumerate(addresses, start=1)]
    if not reached:
        hops += [TraceHop(ttl, "", float("nan"), 0) for ttl in range(len(hops) + 1, 31)]
    found = Trace(tuple(hops), path_fingerprint(addresses))
    return ParsedMessage(MeasurementKind.TRACE, mesh.endpoints[row], traces=[(ts, found)])


def history(mesh: Mesh, rows: list[int], newest_bps: float) -> list[ParsedMessage]:
    """One 1 Gb/s test in each of the five bins before the newest, one in the newest."""
    newest = START * 60 - 3600
    return [
        throughput(mesh, row, dict.fromkeys(OLD_TESTS, 1e9) | {newest: newest_bps}) for row in rows
    ]


def with_two_newest_tests(judge: Judge, rates: dict[int, float]) -> None:
    """Three weeks of 1 Gb/s tests of links `rates`, then two tests in the newest bin at their
    rate, the second a minute later (the rule must still hold after the next test)."""
    mesh = judge.mesh
    run(judge, START - 1)
    run(judge, START, [m for row, bps in rates.items() for m in history(mesh, [row], bps)])
    later = (START + 1) * 60 + 20
    run(judge, START + 1, [throughput(mesh, row, {later: bps}) for row, bps in rates.items()])


def test_a_throughput_drop_in_the_newest_bin_is_bandwidth_decreased_by_aaas_rule() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    run(judge, START - 1)
    run(judge, START, history(mesh, [0], 2e8))
    assert judge.opened() == []  # one test says it: the next must say it too
    run(judge, START + 1, [throughput(mesh, 0, {(START + 1) * 60 + 20: 2e8})])
    (opened,) = judge.opened()
    alarm = opened.alarm
    assert alarm.kind is AlarmKind.BANDWIDTH_DECREASED
    assert alarm.subject == "ps0.site0.example.org -> ps0.site1.example.org"
    assert alarm.opened_at == settled_at(START + 1)
    # bin means 1, 1, 1, 1, 1, 0.2 Gb/s: mean 0.8667, sd 0.3266: z -2.04, change -76.9 %
    assert dict(alarm.evidence) == {
        "change": -0.7692, "z": -2.04, "recent_mean_bps": 200_000_000, "recent_tests": 2,
        "bins": 6, "threshold_change": 0.5, "threshold_z": 2.0,
    }  # fmt: skip
    body = "change -76.9 % (z -2.04; threshold 50.0 %), the last day's 2 tests at 200 Mb/s"
    assert body in alarm.body()
    # a third test at 1 Gb/s: newest mean 0.4667, change -48.8 %: under AAAS's 50 %
    run(judge, START + 2, [throughput(mesh, 0, {(START + 2) * 60 + 20: 1e9})])
    (closed,) = judge.closed()
    assert closed.alarm.id == alarm.id and closed.alarm.ended_at == settled_at(START + 2)


def test_a_drop_in_the_middle_of_a_bin_is_seen_in_the_last_days_tests() -> None:
    """Eleven 1 Gb/s tests in the newest 4-day bin before the drop, then tests at 0.2 Gb/s every
    4 hours: the bin's mean stays near 1 Gb/s for days, the last day's tests say -76.9 % at the
    second of them (the first is confirmed)."""
    mesh = Mesh()
    judge = Judge(mesh)
    bin_start = NEWEST_BIN * BIN_SECONDS
    before = dict.fromkeys([bin_start + k * 14_400 for k in range(11)], 1e9)
    run(judge, START - 30, [throughput(mesh, 0, dict.fromkeys(OLD_TESTS, 1e9) | before)])
    dropped = [START * 60 - 20 * 3600 + k * 14_400 for k in range(5)]
    for minute, tested in enumerate(dropped, start=START - 29):
        run(judge, minute, [throughput(mesh, 0, {tested: 2e8})])
        if minute == START - 29:
            assert judge.opened() == []
    (opened,) = judge.opened()
    assert opened.alarm.opened_at == settled_at(START - 28)  # the second low test
    assert opened.alarm.evidence["recent_tests"] == 2
    assert opened.alarm.evidence["change"] == -0.7692
    newest_bin = judge.mesh.state.results(START * 60).bandwidth
    assert newest_bin.change[0] > -0.5  # the state's newest bin alone would say nothing


def test_one_low_test_that_the_next_does_not_confirm_raises_nothing() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    run(judge, START - 1)
    run(judge, START, history(mesh, [0], 2e8))  # z -2.04, change -76.9 %: one test
    run(judge, START + 1, [throughput(mesh, 0, {(START + 1) * 60 + 20: 1e9})])  # -35.7 %
    run(judge, START + 2, [throughput(mesh, 0, {(START + 2) * 60 + 20: 2e8})])  # -48.8 %
    assert judge.events == []


def test_a_rise_is_bandwidth_increased_and_a_small_change_raises_nothing() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    # 3 Gb/s: change +125 %, z 2.04; 1.3 Gb/s: z 2.04 too (one bin apart from equal ones), but
    # change +23.8 %
    with_two_newest_tests(judge, {0: 3e9, 1: 1.3e9})
    (opened,) = judge.opened()
    assert opened.alarm.kind is AlarmKind.BANDWIDTH_INCREASED
    assert opened.alarm.links == (("10.0.0.1", "10.0.1.1"),)
    assert opened.alarm.evidence["change"] == 1.25


def test_a_host_whose_bandwidth_fell_to_five_sites_gives_one_alarm_for_its_site() -> None:
    mesh = Mesh()  # six sites of one host
    judge = Judge(mesh)
    out_of_host_0 = mesh.rows(lambda s, d: s == 0).tolist()
    with_two_newest_tests(judge, dict.fromkeys(out_of_host_0, 1e8))
    (opened,) = judge.opened()
    assert opened.alarm.kind is AlarmKind.BANDWIDTH_DECREASED_MULTIPLE
    assert opened.alarm.subject == "SITE-0"
    assert opened.alarm.evidence["links"] == 5 and opened.alarm.evidence["peer_sites"] == 5


def establish(judge: Judge, rows: list[int], first: int) -> None:
    """Traces of `rows` over ROUTERS every 10 minutes for 30 minutes from `first`."""
    for minute in range(first, first + 30):
        traced = [trace(judge.mesh, row, minute * 60 + 5, ROUTERS) for row in rows]
        run(judge, minute, traced if (minute - first) % 10 == 0 else [])


def test_a_new_path_that_persists_20_minutes_is_path_changed_and_a_flapping_one_is_not() -> None:
    mesh = Mesh()
    judge = Judge(mesh, AlarmRules(path_adopt_hours=1))
    establish(judge, [0, 1], START)
    changed = START + 30
    for minute in range(changed, changed + 21):
        due = (minute - changed) % 10 == 0
        step = (minute - changed) // 10
        flapping = OTHER_ROUTERS if step % 2 == 0 else ROUTERS
        traced = [
            trace(mesh, 0, minute * 60 + 5, OTHER_ROUTERS),
            trace(mesh, 1, minute * 60 + 5, flapping),
        ]
        run(judge, minute, traced if due else [])
        if minute < changed + 20:
            assert judge.opened() == []  # two traces of the new path, 10 minutes apart: not yet
    (opened,) = judge.opened()
    alarm = opened.alarm
    assert alarm.kind is AlarmKind.PATH_CHANGED
    assert alarm.subject == "ps0.site0.example.org -> ps0.site1.example.org"
    assert alarm.started_at == changed * 60  # the minute of the new path's first trace
    assert alarm.opened_at == settled_at(changed + 20)  # its third trace, 20 minutes later
    assert dict(alarm.evidence) == {"hops": 4, "path_minutes": 20, "changes_last_day": 1}
    # after path_adopt_hours the new path is the link's own: the alarm closes
    for minute in range(changed + 21, changed + 82):
        traced = [trace(mesh, 0, minute * 60 + 5, OTHER_ROUTERS)]
        run(judge, minute, traced if (minute - changed) % 10 == 0 else [])
    (closed,) = judge.closed()
    assert closed.alarm.id == alarm.id
    assert closed.alarm.ended_at == settled_at(changed + 81)  # adopted an hour after it opened


def test_a_path_back_to_the_established_one_closes_its_alarm() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    establish(judge, [0], START)
    for offset in (0, 10, 20):
        run(judge, START + 30 + offset, [trace(mesh, 0, (START + 30 + offset) * 60, OTHER_ROUTERS)])
    assert len(judge.opened()) == 1
    back = START + 60
    run(judge, back, [trace(mesh, 0, back * 60, ROUTERS)])
    (closed,) = judge.closed()
    assert closed.alarm.ended_at == settled_at(back)


def test_a_site_whose_paths_all_changed_gives_one_path_alarm_for_the_site() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    touching_0 = mesh.rows(lambda s, d: 0 in (s, d)).tolist()
    establish(judge, touching_0, START)
    for offset in (0, 10, 20):
        minute = START + 30 + offset
        run(judge, minute, [trace(mesh, row, minute * 60, OTHER_ROUTERS) for row in touching_0])
    (opened,) = judge.opened()
    assert (opened.alarm.kind, opened.alarm.subject) == (AlarmKind.PATH_CHANGED, "SITE-0")
    assert opened.alarm.evidence["links"] == 10


def test_a_destination_no_source_reaches_is_one_alarm_and_most_sources_another() -> None:
    mesh = Mesh(sites=7)
    judge = Judge(mesh)
    into_5 = mesh.rows(lambda s, d: d == 5).tolist()
    into_6 = mesh.rows(lambda s, d: d == 6).tolist()  # from six sources; one still reaches it
    establish(judge, into_5 + into_6, START)
    cut = START + 30
    for offset in range(21):
        minute = cut + offset
        traced = [trace(mesh, row, minute * 60, ROUTERS, reached=False) for row in into_5]
        traced += [
            trace(mesh, row, minute * 60, ROUTERS, reached=row == into_6[0]) for row in into_6
        ]
        run(judge, minute, traced if offset % 10 == 0 else [])
    opened = {event.alarm.kind: event.alarm for event in judge.opened()}
    assert set(opened) == {
        AlarmKind.DESTINATION_UNREACHABLE_ANY,
        AlarmKind.DESTINATION_UNREACHABLE_MULTIPLE,
    }
    from_any = opened[AlarmKind.DESTINATION_UNREACHABLE_ANY]
    assert from_any.subject == "SITE-5"
    assert from_any.opened_at == settled_at(cut + 20)
    assert from_any.evidence["unreached_from"] == 6 and from_any.evidence["traced_from"] == 6
    assert "not reached from 6 of 6 source hosts" in from_any.body()
    multiple = opened[AlarmKind.DESTINATION_UNREACHABLE_MULTIPLE]
    assert multiple.subject == "ps0.site6.example.org"
    assert (multiple.evidence["unreached_from"], multiple.evidence["traced_from"]) == (5, 6)
    # no path changed alarm: a path that stops early is the destination's alarm, not a change
    assert all(e.alarm.kind is not AlarmKind.PATH_CHANGED for e in judge.opened())


def test_without_results_the_result_alarms_stay_as_they_are() -> None:
    judge = Judge(Mesh())
    with_two_newest_tests(judge, {0: 2e8})
    assert len(judge.opened()) == 1
    judge.minute(START + 2)  # a caller without results
    assert judge.closed() == []


def test_an_engine_state_saved_before_the_result_rules_loads_with_them_empty() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    with_two_newest_tests(judge, {0: 2e8})
    state = judge.engine.export()
    assert state.latches[LinkCondition.BANDWIDTH_DECREASED].latched[0]
    older = replace(
        state, latches={c: held for c, held in state.latches.items() if c in MINUTE_CONDITIONS}
    )
    restored = decode_engine(encode_engine(older))
    assert not restored.latches[LinkCondition.BANDWIDTH_DECREASED].latched.any()
    assert len(restored.latches[LinkCondition.PATH_CHANGED]) == len(mesh)
    again = decode_engine(encode_engine(state))
    assert again.latches[LinkCondition.BANDWIDTH_DECREASED].latched[0]


@pytest.mark.parametrize("profile", ["aaas"])
def test_the_aaas_profile_raises_none_of_them(profile: str) -> None:
    from service.alarms.aaas import AaasEngine

    mesh = Mesh()
    judge = Judge(mesh)
    judge.engine = AaasEngine(judge.book)
    with_two_newest_tests(judge, {0: 2e8})
    assert judge.opened() == []


def trace_in_phases(
    judge: Judge, phase: dict[int, int], first: int, routers: list[str], reached: bool = True
) -> None:
    """30 minutes from `first` in which each link of `phase` traces along `routers` at its own
    minute of ten (its phase), as toolkits spread their traceroutes."""
    for minute in range(first, first + 30):
        due = [row for row, offset in phase.items() if (minute - first) % 10 == offset]
        run(judge, minute, [trace(judge.mesh, row, minute * 60, routers, reached) for row in due])


def test_links_whose_traces_run_minutes_apart_give_the_site_alarm_alone() -> None:
    """Each link traces at its own minute of ten: the first new paths to persist already count
    the others' first new traces, so the site's alarm opens with them, no link's first."""
    mesh = Mesh()
    judge = Judge(mesh)
    touching_0 = mesh.rows(lambda s, d: 0 in (s, d)).tolist()
    phase = {row: row % 10 for row in touching_0}
    trace_in_phases(judge, phase, START, ROUTERS)
    changed = START + 30
    trace_in_phases(judge, phase, changed, OTHER_ROUTERS)
    (opened,) = judge.opened()
    assert (opened.alarm.kind, opened.alarm.subject) == (AlarmKind.PATH_CHANGED, "SITE-0")
    first_persisted = changed + 20 + min(phase.values())
    assert opened.alarm.opened_at == settled_at(first_persisted)
    assert judge.closed() == []


def test_a_cut_off_destination_is_from_any_even_while_some_traces_have_not_persisted() -> None:
    mesh = Mesh()
    judge = Judge(mesh)
    into_5 = mesh.rows(lambda s, d: d == 5).tolist()
    phase = {row: (3 * row) % 10 for row in into_5}
    trace_in_phases(judge, phase, START, ROUTERS)
    cut = START + 30
    trace_in_phases(judge, phase, cut, ROUTERS, reached=False)
    (opened,) = judge.opened()
    assert (opened.alarm.kind, opened.alarm.subject) == (
        AlarmKind.DESTINATION_UNREACHABLE_ANY,
        "SITE-5",
    )
    assert opened.alarm.opened_at == settled_at(cut + 20 + min(phase.values()))
    first = [row for row in into_5 if phase[row] == min(phase.values())]
    assert opened.alarm.evidence["unreached_from"] == len(first) < 5  # the others join later
