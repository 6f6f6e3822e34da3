"""Faults injected into a simulated mesh at a chosen minute, on a link, a host or a site.

`parse_fault` reads one `--fault KIND:TARGET:START_MINUTE[:VALUE][:DURATION]` of `nettel
simulate`; `plan_faults` binds faults to a mesh's links; `apply_faults` (pure) turns one minute
of simulated measurements (and the throughput tests and traceroutes that start in it,
`simulation.throughput_traces`) into what the mesh's toolkits would publish under the faults
active then. START_MINUTE counts from the feed's first minute (its first back-filled one);
DURATION is in minutes, the fault lasting to the end without it.

The kinds, and what a perfSONAR toolkit would publish under each (powstream in pScheduler's
latencybg test: the source host leads the test, sends the probes and fetches the receiver's
record of them over OWAMP's control connection, then archives the result):

``complete-loss`` (link, host, site)
    Every probe is lost: the control connection works but the test packets are dropped. The
    source publishes a loss of 1.0 and no delay histogram (no packet to make one of).
``loss`` (link, host, site; VALUE: percent of the probes, default 5)
    That share of the probes is dropped on top of the link's own losses, deterministically:
    ``received - rint(received * VALUE / 100)`` packets remain each minute.
``delay`` (link, host, site; VALUE: ms, default 30)
    Every delivered probe takes VALUE ms longer (a longer path after a route change).
``clock`` (host, site; VALUE: ms the host's clock runs ahead, negative behind, default 150)
    OWAMP stamps a probe's departure with the sender's clock and its arrival with the
    receiver's, so the histograms of links into the host shift by +VALUE and those out of it by
    -VALUE; a host behind by more than a link's delay makes that link's delays negative. The
    bus's histogram-owdelay messages carry no clock-error estimate: pScheduler's run record has
    `max-clock-error` (the two hosts' NTP error estimates summed), but a clock stepped away from
    true time while NTP still believes it synchronised reports a small one, so the shifted
    histograms are all a consumer sees.
``firewall`` (host, site)
    Probes into the target are blocked (the OWAMP test ports, not its control port): every link
    into it publishes a loss of 1.0 and no histogram; links out of it are untouched.
``cut-off`` (host, site)
    The target's network is down. Nothing about its links' delay and loss is published: its
    own toolkit reaches neither the far ends nor the archive, and a remote source sending into
    it cannot fetch the receiver's record (powstream fetches it over a control connection that
    no longer opens), so it has no result to archive. A test led by the receiver (`flip`) would
    at most publish 100 % loss for the session in flight at the cut, then nothing either. So a
    cut-off site shows as its links falling silent while every other link goes on, not as 100 %
    loss (which needs the control connection: the firewall case). Throughput tests to and from
    it fail (no result); its own traceroutes are not archived; a remote source's traceroute
    into it is (the source leads it and archives it itself): it answers up to the last router
    before the target's site and is silent from there to TTL 30, so it does not reach its
    destination.
``throughput-drop`` (link, host, site; VALUE: percent of the rate lost, default 75)
    Every throughput test of the target's links gets VALUE percent less (a failing optic, a
    duplex mismatch, a rate limiter, a NIC that renegotiated to a lower speed); delay and loss
    as before.
``path-change`` (link, host, site)
    The target's links take their alternative route (other backbone routers,
    `throughput_traces.build_routes`): their traceroutes show a new set of hops that persists.
    Delay and loss as before (combine with ``delay`` for a longer route).

The loss, delay and clock faults change what OWAMP measures only, the throughput drop and the
path change the throughput tests and traceroutes only: each kind tests one alarm.

A host target names a host name or its address; in the simulated meshes each site has one
latency host, so a host and its site cover the same links (an alarm engine still tells them
apart by what it groups). A link target is ``SOURCE>DESTINATION`` with a host, address or site
at each end. IPv6 addresses cannot be targets (':' separates the fields); the meshes have none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

import numpy as np

from simulation.simulator import BUCKETS_PER_MS, Mesh, MinuteMeasurements
from simulation.throughput_traces import MeshRoutes, MinuteTests, upstream_hops

FAULT_SYNTAX = "KIND:TARGET:START_MINUTE[:VALUE][:DURATION]"
LINK_SEPARATOR = ">"
#: Largest delay step or clock offset (ms) a fault takes: beyond, the parser refuses every
#: delay anyway (`service.parse.histogram` keeps -1000 .. 50000 ms).
MAX_SHIFT_MS = 10_000.0


class FaultKind(StrEnum):
    COMPLETE_LOSS = "complete-loss"
    LOSS = "loss"
    DELAY = "delay"
    CLOCK = "clock"
    FIREWALL = "firewall"
    CUT_OFF = "cut-off"
    THROUGHPUT_DROP = "throughput-drop"
    PATH_CHANGE = "path-change"


class TargetKind(StrEnum):
    LINK = "link"
    HOST = "host"
    SITE = "site"


#: The VALUE each kind takes (unit, default), or None for kinds that take none.
VALUES: dict[FaultKind, tuple[str, float] | None] = {
    FaultKind.COMPLETE_LOSS: None,
    FaultKind.LOSS: ("percent", 5.0),
    FaultKind.DELAY: ("ms", 30.0),
    FaultKind.CLOCK: ("ms", 150.0),
    FaultKind.FIREWALL: None,
    FaultKind.CUT_OFF: None,
    FaultKind.THROUGHPUT_DROP: ("percent", 75.0),
    FaultKind.PATH_CHANGE: None,
}
#: Which targets each kind takes: a clock, a firewall or a cut belongs to a host or a site.
TARGETS: dict[FaultKind, tuple[TargetKind, ...]] = {
    FaultKind.COMPLETE_LOSS: tuple(TargetKind),
    FaultKind.LOSS: tuple(TargetKind),
    FaultKind.DELAY: tuple(TargetKind),
    FaultKind.CLOCK: (TargetKind.HOST, TargetKind.SITE),
    FaultKind.FIREWALL: (TargetKind.HOST, TargetKind.SITE),
    FaultKind.CUT_OFF: (TargetKind.HOST, TargetKind.SITE),
    FaultKind.THROUGHPUT_DROP: tuple(TargetKind),
    FaultKind.PATH_CHANGE: tuple(TargetKind),
}


@dataclass(frozen=True)
class Fault:
    """One fault as given: `value` is the kind's VALUE (its default filled in), None if it takes
    none; `duration_minutes` None lasts to the end."""

    kind: FaultKind
    target: str
    start_minute: int
    value: float | None = None
    duration_minutes: int | None = None

    def active(self, elapsed_minutes: int) -> bool:
        """Whether the fault holds in the minute `elapsed_minutes` after the feed's first."""
        started = elapsed_minutes >= self.start_minute
        ended = self.duration_minutes is not None and (
            elapsed_minutes >= self.start_minute + self.duration_minutes
        )
        return started and not ended

    def flag(self) -> str:
        """The `--fault` value that gives this fault.

        >>> Fault(FaultKind.FIREWALL, "SITE-05", 8, None, 20).flag()
        'firewall:SITE-05:8::20'
        >>> parse_fault(Fault(FaultKind.CLOCK, "SITE-07", 8, -120.5).flag()).value
        -120.5
        """
        value = "" if self.value is None else repr(self.value)
        duration = "" if self.duration_minutes is None else str(self.duration_minutes)
        return ":".join([self.kind, self.target, str(self.start_minute), value, duration])

    def describe(self) -> str:
        """
        >>> Fault(FaultKind.LOSS, "SITE-01>SITE-02", 10, 5.0, 20).describe()
        'loss 5 percent on SITE-01>SITE-02 from minute 10 for 20 minutes'
        """
        unit = VALUES[self.kind]
        value = "" if unit is None or self.value is None else f" {self.value:g} {unit[0]}"
        until = "" if self.duration_minutes is None else f" for {self.duration_minutes} minutes"
        return f"{self.kind}{value} on {self.target} from minute {self.start_minute}{until}"


@dataclass(frozen=True, eq=False)
class PlannedFault:
    """A fault bound to a mesh: the links it touches and, for delay and clock faults, the shift
    (ms) it adds to each link's delays."""

    fault: Fault
    target_kind: TargetKind
    #: Index of the target host (= site) in the mesh, or the link's (source, destination) hosts.
    hosts: tuple[int, ...]
    links: np.ndarray
    shift_ms: np.ndarray
    #: Of `links`, those into the target (a host or site target; a link target's link).
    into: np.ndarray


@dataclass(frozen=True, eq=False)
class FaultPlan:
    """The faults of a feed, bound to its mesh's links."""

    faults: tuple[PlannedFault, ...] = ()

    def active(self, elapsed_minutes: int) -> list[PlannedFault]:
        return [p for p in self.faults if p.fault.active(elapsed_minutes)]


NO_FAULTS = FaultPlan()


@dataclass(frozen=True, eq=False)
class FaultedMinute:
    """A minute of measurements under the active faults, and which links publish it at all;
    the throughput tests and traceroutes that start in it under the faults (None: none
    simulated)."""

    measurements: MinuteMeasurements
    published: np.ndarray = field(repr=False)
    tests: MinuteTests | None = None


def parse_fault(text: str) -> Fault:
    """One `--fault` value; ValueError says what is wrong with it.

    >>> parse_fault("delay:SITE-03:12").describe()
    'delay 30 ms on SITE-03 from minute 12'
    >>> parse_fault("complete-loss:SITE-01>SITE-02:5::10").duration_minutes
    10
    """
    try:
        return _parse(text)
    except ValueError as error:
        raise ValueError(f"{text!r}: {error}") from None


def parse_faults(texts: Sequence[str]) -> list[Fault]:
    """Every `--fault` given; the ValueError names the flag and the faulty value."""
    faults = []
    for text in texts:
        try:
            faults.append(parse_fault(text))
        except ValueError as error:
            raise ValueError(f"--fault {error}") from None
    return faults


def _parse(text: str) -> Fault:
    fields = [part.strip() for part in text.split(":")]
    if not 3 <= len(fields) <= 5:
        raise ValueError(f"expected {FAULT_SYNTAX}")
    kind_text, target, start_text, *rest = fields
    kind = _kind(kind_text)
    if not target:
        raise ValueError("TARGET is empty (a site, a host, or SOURCE>DESTINATION)")
    start = _whole_minutes(start_text, "START_MINUTE", minimum=0)
    value = _value(kind, rest[0] if rest else "")
    duration = None
    if len(rest) == 2 and rest[1]:
        duration = _whole_minutes(rest[1], "DURATION", minimum=1)
    return Fault(kind, target, start, value, duration)


def plan_faults(mesh: Mesh, faults: Sequence[Fault]) -> FaultPlan:
    """Bind `faults` to `mesh`'s links; ValueError for a target the mesh lacks or a kind of
    target the fault does not take."""
    planned = []
    for fault in faults:
        try:
            planned.append(_planned(mesh, fault))
        except ValueError as error:
            raise ValueError(f"--fault {fault.describe()}: {error}") from None
    return FaultPlan(tuple(planned))


def plan_fault_flags(texts: Sequence[str], mesh: Mesh) -> FaultPlan:
    """The `--fault` values given, parsed and bound to `mesh`; ValueError names what is wrong."""
    return plan_faults(mesh, parse_faults(texts))


def apply_faults(
    measured: MinuteMeasurements,
    plan: FaultPlan,
    elapsed_minutes: int,
    tests: MinuteTests | None = None,
    routes: MeshRoutes | None = None,
) -> FaultedMinute:
    """`measured` (and `tests`, on `routes`) as published under the faults active
    `elapsed_minutes` after the first minute: losses first (each thins what the ones before
    left), then the delay shifts, summed; throughput drops multiply."""
    received = measured.received.copy()
    published = np.ones(len(received), dtype=bool)
    shift_ms = np.zeros(len(received))
    active = plan.active(elapsed_minutes)
    for planned in active:
        links, kind = planned.links, planned.fault.kind
        if kind in (FaultKind.COMPLETE_LOSS, FaultKind.FIREWALL):
            received[links] = 0
        elif kind is FaultKind.LOSS:
            share = (planned.fault.value or 0.0) / 100
            received[links] -= np.rint(received[links] * share).astype(received.dtype)
        elif kind is FaultKind.CUT_OFF:
            published[links] = False
        else:
            shift_ms += planned.shift_ms
    shift = np.rint(shift_ms * BUCKETS_PER_MS).astype(measured.buckets.dtype)
    buckets = measured.buckets + shift[:, None] if shift.any() else measured.buckets
    faulted = replace(measured, buckets=buckets, received=received)
    if tests is not None and routes is not None:
        tests = apply_test_faults(tests, routes, plan, elapsed_minutes)
    return FaultedMinute(faulted, published, tests)


def apply_test_faults(
    tests: MinuteTests, routes: MeshRoutes, plan: FaultPlan, elapsed_minutes: int
) -> MinuteTests:
    """A minute's throughput tests and traceroutes (on `routes`) as published under the faults
    active `elapsed_minutes` after the first minute: throughput drops, path changes, cut-offs."""
    active = plan.active(elapsed_minutes)
    bps, alternative = tests.bps.copy(), tests.alternative.copy()
    answered = tests.answered.copy()
    n_links = len(routes.usual)
    silent, unreached = np.zeros(n_links, bool), np.zeros(n_links, bool)
    for planned in active:
        links, kind = planned.links, planned.fault.kind
        if kind is FaultKind.THROUGHPUT_DROP:
            kept = 1 - (planned.fault.value or 0.0) / 100
            bps[links[tests.throughput_links]] *= kept
        elif kind is FaultKind.PATH_CHANGE:
            alternative |= links[tests.trace_links]
        elif kind is FaultKind.CUT_OFF:
            silent |= links & ~planned.into  # the target's own tests: not archived
            unreached |= planned.into
    cut = unreached[tests.trace_links]
    if cut.any():
        for position in np.flatnonzero(cut).tolist():
            link = int(tests.trace_links[position])
            chosen = routes.alternative if alternative[position] else routes.usual
            answered[position] = upstream_hops(chosen[link])
    tested = replace(tests, bps=bps, alternative=alternative, answered=answered)
    return tested.without(silent | unreached, silent)


def _kind(text: str) -> FaultKind:
    try:
        return FaultKind(text)
    except ValueError:
        kinds = ", ".join(kind.value for kind in FaultKind)
        raise ValueError(f"unknown KIND {text!r}: one of {kinds}") from None


def _whole_minutes(text: str, name: str, minimum: int) -> int:
    try:
        minutes = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number of minutes, not {text!r}") from None
    if minutes < minimum:
        raise ValueError(f"{name} must be >= {minimum}, not {minutes}")
    return minutes


def _value(kind: FaultKind, text: str) -> float | None:
    unit = VALUES[kind]
    if unit is None:
        if text:
            empty = f"{kind}:TARGET:START_MINUTE::DURATION"
            raise ValueError(f"{kind} takes no VALUE (leave it empty: {empty})")
        return None
    if not text:
        return unit[1]
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{kind} VALUE must be a number of {unit[0]}, not {text!r}") from None
    if kind is FaultKind.LOSS and not 0 < value <= 100:
        raise ValueError(f"loss VALUE is a percentage in (0, 100], not {value:g}")
    if kind is FaultKind.THROUGHPUT_DROP and not 0 < value < 100:
        raise ValueError(f"throughput-drop VALUE is a percentage in (0, 100), not {value:g}")
    if kind is FaultKind.DELAY and not 0 < value <= MAX_SHIFT_MS:
        raise ValueError(f"delay VALUE is a step up in ms, in (0, {MAX_SHIFT_MS:g}], not {value:g}")
    if kind is FaultKind.CLOCK and not (value != 0 and abs(value) <= MAX_SHIFT_MS):
        raise ValueError(
            f"clock VALUE is an offset in ms, not 0 and within +-{MAX_SHIFT_MS:g}, not {value:g}"
        )
    return value


def _planned(mesh: Mesh, fault: Fault) -> PlannedFault:
    if LINK_SEPARATOR in fault.target:
        target_kind = TargetKind.LINK
        source_text, _, destination_text = fault.target.partition(LINK_SEPARATOR)
        source, destination = _host(mesh, source_text)[0], _host(mesh, destination_text)[0]
        if source == destination:
            raise ValueError("a link joins two different hosts")
        hosts: tuple[int, ...] = (source, destination)
        links = (mesh.source == source) & (mesh.destination == destination)
        into = links
        out_of = np.zeros_like(links)
    else:
        host, target_kind = _host(mesh, fault.target)
        hosts = (host,)
        into, out_of = mesh.destination == host, mesh.source == host
        links = into if fault.kind is FaultKind.FIREWALL else into | out_of
    if target_kind not in TARGETS[fault.kind]:
        allowed = " or ".join(TARGETS[fault.kind])
        raise ValueError(f"{fault.kind} takes a {allowed} as TARGET, not a {target_kind}")
    value = fault.value or 0.0
    if fault.kind is FaultKind.DELAY:
        shift = np.where(links, value, 0.0)
    elif fault.kind is FaultKind.CLOCK:
        shift = np.where(into, value, 0.0) - np.where(out_of, value, 0.0)
    else:
        shift = np.zeros(mesh.n_links)
    return PlannedFault(fault, target_kind, hosts, links, shift, links & into)


def _host(mesh: Mesh, name: str) -> tuple[int, TargetKind]:
    """The mesh's host (= site) index a site name, host name or address names."""
    name = name.strip()
    for names, kind in (
        (mesh.site_names, TargetKind.SITE),
        (mesh.host_names, TargetKind.HOST),
        (mesh.host_ips, TargetKind.HOST),
    ):
        if name in names:
            return names.index(name), kind
    sites = f"{mesh.site_names[0]} .. {mesh.site_names[-1]}"
    raise ValueError(f"{name!r} is no site, host or address of the mesh ({sites})")
