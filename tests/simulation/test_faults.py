"""Injected faults: the `--fault` syntax, binding to a mesh's links, and what each fault makes
the mesh publish (exact packet counts, delay buckets and messages)."""

from __future__ import annotations

import numpy as np
import pytest

from service.cli import main
from simulation.demo_feed import minute_messages
from simulation.faults import (
    FaultKind,
    FaultPlan,
    TargetKind,
    apply_faults,
    parse_fault,
    parse_faults,
    plan_faults,
)
from simulation.simulator import Mesh, MinuteMeasurements, build_mesh

#: Link order of a 3-site mesh: (0,1) (0,2) (1,0) (1,2) (2,0) (2,1) as (source, destination).
LINKS = [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
MINUTE = 28_333_334


@pytest.fixture(scope="module")
def mesh() -> Mesh:
    built = build_mesh(3, seed=4)
    assert list(zip(built.source.tolist(), built.destination.tolist(), strict=True)) == LINKS
    return built


def measurements(received: list[int] | None = None) -> MinuteMeasurements:
    """Six links, 4 probes each: link i's probes at 10.00, 10.10, 10.20, 10.30 ms + i ms."""
    buckets = np.array(
        [[1000 + 100 * i, 1010 + 100 * i, 1020 + 100 * i, 1030 + 100 * i] for i in range(6)]
    )
    counts = np.array(received if received is not None else [4] * 6)
    return MinuteMeasurements(MINUTE, buckets.astype(np.int32), counts, 4)


def planned(mesh: Mesh, *texts: str) -> FaultPlan:
    return plan_faults(mesh, [parse_fault(text) for text in texts])


@pytest.mark.parametrize(
    ("text", "kind", "target", "start", "value", "duration"),
    [
        ("complete-loss:SITE-01>SITE-02:10", FaultKind.COMPLETE_LOSS, "SITE-01>SITE-02", 10,
         None, None),
        ("loss:SITE-02:0", FaultKind.LOSS, "SITE-02", 0, 5.0, None),
        ("loss:SITE-02:3:2.5:7", FaultKind.LOSS, "SITE-02", 3, 2.5, 7),
        ("delay:ps-latency.site01.example.org:5:40", FaultKind.DELAY,
         "ps-latency.site01.example.org", 5, 40.0, None),
        ("clock:10.0.3.10:1:-120", FaultKind.CLOCK, "10.0.3.10", 1, -120.0, None),
        ("firewall:SITE-03:4::6", FaultKind.FIREWALL, "SITE-03", 4, None, 6),
        (" cut-off : SITE-03 : 4 ", FaultKind.CUT_OFF, "SITE-03", 4, None, None),
    ],
)  # fmt: skip
def test_a_fault_is_read_with_its_kinds_default_value(
    text: str,
    kind: FaultKind,
    target: str,
    start: int,
    value: float | None,
    duration: int | None,
) -> None:
    fault = parse_fault(text)
    assert (fault.kind, fault.target, fault.start_minute) == (kind, target, start)
    assert (fault.value, fault.duration_minutes) == (value, duration)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("loss:SITE-01", "expected KIND:TARGET:START_MINUTE[:VALUE][:DURATION]"),
        ("loss:SITE-01:1:2:3:4", "expected KIND:TARGET:START_MINUTE"),
        ("drop:SITE-01:1", "unknown KIND 'drop': one of complete-loss, loss, delay, clock, "
                           "firewall, cut-off"),
        ("loss::1", "TARGET is empty"),
        ("loss:SITE-01:soon", "START_MINUTE must be a whole number of minutes, not 'soon'"),
        ("loss:SITE-01:-1", "START_MINUTE must be >= 0, not -1"),
        ("loss:SITE-01:1:5:0", "DURATION must be >= 1, not 0"),
        ("loss:SITE-01:1:250", "loss VALUE is a percentage in (0, 100], not 250"),
        ("loss:SITE-01:1:nan", "loss VALUE is a percentage in (0, 100], not nan"),
        ("loss:SITE-01:1:lots", "loss VALUE must be a number of percent, not 'lots'"),
        ("delay:SITE-01:1:-5", "delay VALUE is a step up in ms, in (0, 10000], not -5"),
        ("clock:SITE-01:1:0", "clock VALUE is an offset in ms, not 0 and within +-10000, not 0"),
        ("clock:SITE-01:1:inf", "clock VALUE is an offset in ms"),
        ("firewall:SITE-01:1:3", "firewall takes no VALUE (leave it empty: "
                                 "firewall:TARGET:START_MINUTE::DURATION)"),
    ],
)  # fmt: skip
def test_a_wrong_fault_is_refused_with_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_faults([text])
    assert str(refused.value).startswith(f"--fault {text!r}: ")
    assert message in str(refused.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("loss:SITE-09:1", "on SITE-09 from minute 1: 'SITE-09' is no site, host or address "
                           "of the mesh (SITE-01 .. SITE-03)"),
        ("loss:SITE-01>nowhere:1", "'nowhere' is no site"),
        ("loss:SITE-01>10.0.1.10:1", "a link joins two different hosts"),
        ("clock:SITE-01>SITE-02:1", "clock takes a host or site as TARGET, not a link"),
        ("firewall:SITE-01>SITE-02:1", "firewall takes a host or site as TARGET, not a link"),
        ("cut-off:SITE-01>SITE-02:1", "cut-off takes a host or site as TARGET, not a link"),
    ],
)  # fmt: skip
def test_a_target_the_mesh_lacks_is_refused(mesh: Mesh, text: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        planned(mesh, text)
    assert str(refused.value).startswith("--fault ")
    assert message in str(refused.value)


def test_targets_name_sites_hosts_addresses_and_links(mesh: Mesh) -> None:
    plan = planned(
        mesh,
        "loss:SITE-02:0",
        "loss:ps-latency.site02.example.org:0",
        "loss:10.0.2.10>SITE-03:0",
        "firewall:SITE-02:0",
    )
    site, host, link, firewall = plan.faults
    into_or_out_of_2 = [True, False, True, True, False, True]
    assert (site.target_kind, site.hosts, site.links.tolist()) == (
        TargetKind.SITE,
        (1,),
        into_or_out_of_2,
    )
    assert (host.target_kind, host.links.tolist()) == (TargetKind.HOST, into_or_out_of_2)
    assert (link.target_kind, link.hosts) == (TargetKind.LINK, (1, 2))
    assert link.links.tolist() == [False, False, False, True, False, False]
    assert firewall.links.tolist() == [True, False, False, False, False, True]  # into it only


def test_complete_loss_and_firewall_keep_no_probe_of_their_links(mesh: Mesh) -> None:
    plan = planned(mesh, "complete-loss:SITE-01>SITE-03:0", "firewall:SITE-02:0")
    faulted = apply_faults(measurements(), plan, 0)
    assert faulted.measurements.received.tolist() == [0, 0, 4, 4, 4, 0]
    assert faulted.measurements.loss.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    assert faulted.published.all()


def test_loss_drops_its_share_of_the_probes_left_rounded(mesh: Mesh) -> None:
    plan = planned(mesh, "loss:SITE-01>SITE-02:0:5", "loss:SITE-01>SITE-03:0:30")
    m = MinuteMeasurements(
        MINUTE, np.zeros((6, 600), np.int32), np.array([600, 599, 600, 600, 600, 600]), 600
    )
    faulted = apply_faults(m, plan, 0).measurements
    # 600 - rint(30) = 570; 599 - rint(179.7) = 419
    assert faulted.received.tolist() == [570, 419, 600, 600, 600, 600]
    twice = planned(mesh, "loss:SITE-01>SITE-02:0:50", "loss:SITE-01:0:50")
    thinned = apply_faults(m, twice, 0).measurements.received.tolist()
    assert thinned == [150, 299, 300, 600, 300, 600]  # 599 - rint(299.5) = 599 - 300


def test_a_delay_step_shifts_every_probe_of_its_links(mesh: Mesh) -> None:
    plan = planned(mesh, "delay:SITE-02>SITE-01:0:30", "delay:SITE-02>SITE-01:0:0.255")
    buckets = apply_faults(measurements(), plan, 0).measurements.buckets
    assert buckets[2].tolist() == [1200 + 3026, 1210 + 3026, 1220 + 3026, 1230 + 3026]
    assert (np.delete(buckets, 2, axis=0) == np.delete(measurements().buckets, 2, axis=0)).all()


def test_a_clock_ahead_lengthens_the_links_into_its_host_and_shortens_those_out(mesh: Mesh) -> None:
    faulted = apply_faults(measurements(), planned(mesh, "clock:SITE-01:0:15"), 0).measurements
    shift = (faulted.buckets - measurements().buckets)[:, 0]
    assert shift.tolist() == [-1500, -1500, 1500, 0, 1500, 0]
    delays = faulted.delays_ms
    assert delays[0].tolist() == pytest.approx([-5.0, -4.9, -4.8, -4.7])  # negative: clock shows


def test_a_cut_off_site_publishes_nothing_on_its_links(mesh: Mesh) -> None:
    faulted = apply_faults(measurements(), planned(mesh, "cut-off:SITE-03:0"), 0)
    assert faulted.published.tolist() == [True, False, True, False, False, False]
    messages = minute_messages(mesh, faulted, sent_at=MINUTE * 60 + 65.0)
    links = {(body["meta"]["source"], body["meta"]["destination"]) for _, body in messages}
    assert links == {("10.0.1.10", "10.0.2.10"), ("10.0.2.10", "10.0.1.10")}
    assert len(messages) == 4  # a delay and a loss message each


def test_a_fault_holds_from_its_start_for_its_duration(mesh: Mesh) -> None:
    plan = planned(mesh, "complete-loss:SITE-01>SITE-02:3::2")
    held = [
        apply_faults(measurements(), plan, minute).measurements.received[0] for minute in range(7)
    ]
    assert held == [4, 4, 4, 0, 0, 4, 4]
    assert apply_faults(measurements(), FaultPlan(), 3).measurements.received[0] == 4


def test_the_published_messages_carry_the_fault(mesh: Mesh) -> None:
    plan = planned(mesh, "complete-loss:SITE-01>SITE-02:0", "delay:SITE-02>SITE-01:0:30")
    messages = minute_messages(mesh, apply_faults(measurements(), plan, 0), sent_at=0.0)
    by_link: dict[tuple[str, str], dict[str, object]] = {}
    for headers, body in messages:
        link = (body["meta"]["source"], body["meta"]["destination"])
        by_link.setdefault(link, {})[headers["event-type"]] = body["datapoints"][str(MINUTE * 60)]
    assert by_link[("10.0.1.10", "10.0.2.10")] == {"packet-loss-rate": 1.0}  # no histogram
    assert by_link[("10.0.2.10", "10.0.1.10")] == {
        "histogram-owdelay": {"42.00": 1, "42.10": 1, "42.20": 1, "42.30": 1},
        "packet-loss-rate": 0.0,
    }


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("drop:SITE-01:1", "nettel: --fault 'drop:SITE-01:1': unknown KIND 'drop'"),
        ("firewall:SITE-01>SITE-02:1", "nettel: --fault firewall on SITE-01>SITE-02 from minute 1: "
                                       "firewall takes a host or site as TARGET, not a link"),
        ("loss:SITE-21:1", "'SITE-21' is no site, host or address of the mesh "
                           "(SITE-01 .. SITE-20)"),
    ],
)  # fmt: skip
def test_nettel_simulate_refuses_a_wrong_fault_before_it_connects(
    fault: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", "--brokers", "127.0.0.1:1", "--no-realtime", "--fault", fault]
    assert main(argv) == 2  # no broker listens on port 1: refused before any connection
    assert message in capsys.readouterr().err
