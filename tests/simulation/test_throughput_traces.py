"""The demo mesh's throughput tests and traceroutes: their cadence, their routes, what the
throughput-drop, path-change and cut-off faults make of them, their bus messages as the service
parses them, and the three weeks of throughput history the feed sends first."""

from __future__ import annotations

import json

import numpy as np
import pytest

from service.parse.perfsonar import parse_message
from service.parse.records import MeasurementKind
from service.state.throughput_state import ThroughputState
from simulation.bus_format import build_trace_message
from simulation.demo_feed import demo_minute, history_messages, minute_messages, result_messages
from simulation.faults import apply_faults, parse_fault, plan_faults
from simulation.simulator import Mesh, build_mesh
from simulation.throughput_traces import (
    MAX_TTL,
    NIC_BPS,
    THROUGHPUT_EVERY_MINUTES,
    TRACE_EVERY_MINUTES,
    MeshRoutes,
    build_routes,
    simulate_tests,
    throughput_history,
    trace_hops,
    upstream_hops,
)

MINUTE = 29_000_000
#: Link order of a 3-site mesh: (0,1) (0,2) (1,0) (1,2) (2,0) (2,1) as (source, destination).
LINKS = [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]


@pytest.fixture(scope="module")
def mesh() -> Mesh:
    built = build_mesh(3, seed=4)
    assert list(zip(built.source.tolist(), built.destination.tolist(), strict=True)) == LINKS
    return built


@pytest.fixture(scope="module")
def routes(mesh: Mesh) -> MeshRoutes:
    return build_routes(mesh, seed=4)


def simulated_minutes(mesh: Mesh, minutes: range, utilisation: float = 0.2):
    load = np.full(mesh.n_links, utilisation)
    return [simulate_tests(mesh, 4, minute, load) for minute in minutes]


def test_every_link_tests_once_per_cycle_and_traces_every_ten_minutes(mesh: Mesh) -> None:
    cycle = simulated_minutes(mesh, range(MINUTE, MINUTE + THROUGHPUT_EVERY_MINUTES))
    tested = np.concatenate([t.throughput_links for t in cycle])
    traced = np.concatenate([t.trace_links for t in cycle])
    assert sorted(tested.tolist()) == list(range(6))
    assert np.bincount(traced).tolist() == [THROUGHPUT_EVERY_MINUTES // TRACE_EVERY_MINUTES] * 6
    for minute_tests in cycle:
        starts = (minute_tests.trace_ts - minute_tests.minute * 60).tolist()
        assert all(0 <= second < 60 for second in starts)  # within its own minute


def test_a_test_gets_what_the_path_leaves_free_up_to_the_hosts_nic(mesh: Mesh) -> None:
    window = range(MINUTE, MINUTE + THROUGHPUT_EVERY_MINUTES)
    idle = {
        int(t.throughput_links[0]): t.bps[0]
        for t in simulated_minutes(mesh, window, 0.1)
        if len(t.bps)
    }
    busy = {
        int(t.throughput_links[0]): t.bps[0]
        for t in simulated_minutes(mesh, window, 0.95)
        if len(t.bps)
    }
    for link, calm in idle.items():
        capacity = mesh.capacity_bps[link]
        expected = min(NIC_BPS, 0.9 * capacity) / min(NIC_BPS, 0.05 * capacity)
        assert calm / busy[link] == pytest.approx(expected, rel=1e-9)  # same noise: same minute
        rtt_ms = 2 * mesh.base_delay_ms[link]
        assert calm < min(NIC_BPS, 0.9 * capacity) / (1 + rtt_ms / 200) * 1.4


def test_routes_run_from_the_sites_gateways_to_the_destination_host(
    mesh: Mesh, routes: MeshRoutes
) -> None:
    usual, other = routes.usual[3], routes.alternative[3]  # SITE-02 -> SITE-03
    assert [hop.address for hop in usual[:2]] == ["10.0.2.1", "172.16.2.1"]
    assert [hop.address for hop in usual[-3:]] == ["172.16.3.1", "10.0.3.1", "10.0.3.10"]
    assert usual[:2] == other[:2] and usual[-3:] == other[-3:]
    assert {hop.address for hop in usual[2:-3]}.isdisjoint(hop.address for hop in other[2:-3])
    shares = [hop.share for hop in usual]
    assert shares == sorted(shares) and shares[-1] == 1.0
    assert upstream_hops(usual) == len(usual) - 3


def test_traces_parse_with_the_service_parser_and_a_cut_trace_does_not_reach(
    mesh: Mesh, routes: MeshRoutes
) -> None:
    route = routes.usual[0]
    full = trace_hops(route, 30.0, -1)
    cut = trace_hops(route, 30.0, upstream_hops(route))
    ts = MINUTE * 60 + 7
    parsed = []
    for hops in (full, cut):
        message = build_trace_message(mesh, 0, {ts: hops})[1]
        parsed.append(parse_message(MeasurementKind.TRACE, json.dumps(message).encode()))
    [(_, whole)], [(_, stopped)] = (p.traces for p in parsed)
    assert [hop.address for hop in whole.hops] == [hop.address for hop in route]
    assert whole.hops[-1].rtt_ms == pytest.approx(60.05)  # twice 30 ms, plus jitter
    assert len(stopped.hops) == MAX_TTL and stopped.hops[-1].address == ""
    assert stopped.hops[upstream_hops(route) - 1].address == route[-4].address
    assert whole.fingerprint != stopped.fingerprint


def faulted(mesh: Mesh, routes: MeshRoutes, *faults: str, minute: int = MINUTE):
    plan = plan_faults(mesh, [parse_fault(text) for text in faults])
    measured, tests = demo_minute(mesh, 4, minute)
    return tests, apply_faults(measured, plan, 0, tests, routes).tests


def first_minute_with(mesh: Mesh, link: int, throughput: bool) -> int:
    for minute in range(MINUTE, MINUTE + THROUGHPUT_EVERY_MINUTES):
        tests = simulate_tests(mesh, 4, minute, np.zeros(mesh.n_links))
        if link in (tests.throughput_links if throughput else tests.trace_links):
            return minute
    raise AssertionError("no test")


def test_a_throughput_drop_takes_its_share_off_its_links_tests_only(
    mesh: Mesh, routes: MeshRoutes
) -> None:
    minute = first_minute_with(mesh, 3, throughput=True)  # SITE-02 -> SITE-03
    before, after = faulted(mesh, routes, "throughput-drop:SITE-02>SITE-03:0:80", minute=minute)
    assert after is not None
    assert after.bps.tolist() == pytest.approx((before.bps * 0.2).tolist())
    assert after.throughput_links.tolist() == before.throughput_links.tolist() == [3]
    assert after.retransmits.tolist() == before.retransmits.tolist()
    assert parse_fault("throughput-drop:SITE-01:3").value == 75.0
    with pytest.raises(ValueError, match=r"a percentage in \(0, 100\), not 100"):
        parse_fault("throughput-drop:SITE-01:3:100")


def test_a_path_change_sends_the_targets_traces_over_their_other_route(
    mesh: Mesh, routes: MeshRoutes
) -> None:
    minute = first_minute_with(mesh, 0, throughput=False)
    before, after = faulted(mesh, routes, "path-change:SITE-01:0", minute=minute)
    assert after is not None and after.trace_links.tolist() == before.trace_links.tolist()
    touching = [link in (0, 1, 2, 4) for link in after.trace_links.tolist()]  # SITE-01's links
    assert after.alternative.tolist() == touching
    for link, (_, body) in zip(
        after.trace_links.tolist(), result_messages(mesh, after, routes, 0.0), strict=True
    ):
        [(_, trace)] = parse_message(MeasurementKind.TRACE, json.dumps(body)).traces
        route = (routes.alternative if link in (0, 1, 2, 4) else routes.usual)[link]
        assert [hop.address for hop in trace.hops] == [hop.address for hop in route]


def test_a_cut_off_site_publishes_no_test_of_its_own_and_traces_into_it_stop_short(
    mesh: Mesh, routes: MeshRoutes
) -> None:
    cycle = range(MINUTE, MINUTE + THROUGHPUT_EVERY_MINUTES)
    plan = plan_faults(mesh, [parse_fault("cut-off:SITE-02:0")])
    published_tests, published_traces = [], []
    for minute in cycle:
        measured, tests = demo_minute(mesh, 4, minute)
        after = apply_faults(measured, plan, 0, tests, routes).tests
        assert after is not None
        published_tests += after.throughput_links.tolist()
        published_traces += list(
            zip(after.trace_links.tolist(), after.answered.tolist(), strict=True)
        )
    assert sorted(set(published_tests)) == [1, 4]  # SITE-01 <-> SITE-03 only
    into_02 = {link for link, _ in published_traces if LINKS[link][1] == 1}
    assert into_02 == {0, 5}  # from SITE-01 and SITE-03: archived by their sources
    assert not any(LINKS[link][0] == 1 for link, _ in published_traces)  # its own: not archived
    for link, answered in published_traces:
        expected = upstream_hops(routes.usual[link]) if LINKS[link][1] == 1 else -1
        assert answered == expected


def test_a_minute_publishes_its_tests_and_traces_as_the_service_reads_them(
    mesh: Mesh, routes: MeshRoutes
) -> None:
    minute = first_minute_with(mesh, 2, throughput=True)
    measured, tests = demo_minute(mesh, 4, minute)
    faulted_minute = apply_faults(measured, plan_faults(mesh, []), 0, tests, routes)
    messages = minute_messages(mesh, faulted_minute, 0.0, routes)
    by_topic: dict[str, list] = {}
    for headers, body in messages:
        by_topic.setdefault(headers["destination"].rsplit(".", 1)[-1], []).append(body)
    assert len(by_topic["throughput"]) == len(tests.throughput_links) >= 1
    assert len(by_topic["packet-trace"]) == len(tests.trace_links)
    rate = parse_message(MeasurementKind.THROUGHPUT, json.dumps(by_topic["throughput"][0]))
    count = parse_message(
        MeasurementKind.RETRANSMITS, json.dumps(by_topic["packet-retransmits"][0])
    )
    assert rate.throughputs == [(int(tests.throughput_ts[0]), round(tests.bps[0]))]
    assert count.retransmits == [(int(tests.throughput_ts[0]), int(tests.retransmits[0]))]
    assert by_topic["throughput"][0]["meta"]["tool_name"] == "pscheduler/iperf3"
    assert (
        minute_messages(mesh, faulted_minute, 0.0)
        == minute_messages(mesh, faulted_minute, 0.0, routes)[
            : len(messages) - 2 * len(tests.throughput_links) - len(tests.trace_links)
        ]
    )


def test_the_history_fills_the_services_throughput_window_up_to_the_first_minute(
    mesh: Mesh,
) -> None:
    history = throughput_history(mesh, 4, MINUTE)
    earliest = ThroughputState.window_start(MINUTE * 60)
    assert history.ts.min() >= earliest and history.ts.max() < MINUTE * 60
    days = (MINUTE * 60 - earliest) / 86_400
    per_link = np.bincount(history.links, minlength=mesh.n_links)
    assert (abs(per_link - days * 6) <= 1).all()  # one test every 4 hours
    assert history.ts.tolist() == throughput_history(mesh, 4, MINUTE).ts.tolist()  # seeded
    messages = history_messages(mesh, 4, MINUTE, 0.0)
    sent = sum(
        len(body["datapoints"])
        for headers, body in messages
        if headers["event-type"] == "throughput"
    )
    assert sent == len(history.ts)
    assert all(len(body["datapoints"]) <= 100 for _, body in messages)
