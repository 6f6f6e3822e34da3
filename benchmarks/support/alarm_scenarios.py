"""Which faults an alarm replay injects, which alarm each should raise, and the simulator's truth
that tells an alarm no fault caused from a false one.

Per seed, the demo mesh gets one fault of each kind at once, on targets drawn from the seed that
do not overlap: a firewall, a cut-off, a clock offset and a host losing a share of its probes on
four sites whose clocks are sane, and a complete loss, a loss and a delay step on links between
other sites that are calm (by default not congestion prone) and join sane clocks (so neither
the link's own congestion nor a clock blurs what the fault did), the delay step on a link
shorter than DELAY_LINK_MAX_MS. A fault's alarm is the first alarm of its kind about its target
opened at or after its onset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from service.alarms.conditions import CLOCK_CORRECTION_MS, HIGH_LOSS
from service.alarms.grouping import LINK_SEPARATOR
from service.alarms.records import Alarm, AlarmEvent, AlarmKind
from simulation.faults import Fault, FaultKind, PlannedFault, TargetKind
from simulation.simulator import Mesh, blocking_probability

LOSS_PERCENT = 5.0
DELAY_STEP_MS = 30.0
CLOCK_OFFSET_MS = 150.0
#: The delay step goes on a link shorter than this: AAAS's rule flags a median above 1.5 x the
#: baseline's p95, so a 30 ms step is seen on links up to about 60 ms, not on longer ones.
DELAY_LINK_MAX_MS = 40.0
#: Utilisation above which a link's queue raises its delay (M/M/1/K waits climb steeply
#: above 80 %), and the share the model's congestion probability is about.
QUEUEING_UTILISATION = 0.8
CONGESTED_UTILISATION = 0.7
#: A loss the simulated physics make complete.
COMPLETE = 0.999


class Scenario(StrEnum):
    """The faults measured, with the alarm each should raise."""

    COMPLETE_LOSS = "complete loss"
    HIGH_LOSS = "high loss"
    MULTIPLE_LINKS = "loss on a host's links"
    FIREWALL = "firewall"
    SITE_CUT = "site cut off"
    DELAY_STEP = "delay step"
    CLOCK_OFFSET = "clock offset"


EXPECTED_KIND: dict[Scenario, AlarmKind] = {
    Scenario.COMPLETE_LOSS: AlarmKind.COMPLETE_PACKET_LOSS,
    Scenario.HIGH_LOSS: AlarmKind.HIGH_PACKET_LOSS,
    Scenario.MULTIPLE_LINKS: AlarmKind.HIGH_PACKET_LOSS_MULTIPLE,
    Scenario.FIREWALL: AlarmKind.FIREWALL_ISSUE,
    Scenario.SITE_CUT: AlarmKind.LINK_SILENT,
    Scenario.DELAY_STEP: AlarmKind.HIGH_DELAY,
    Scenario.CLOCK_OFFSET: AlarmKind.LARGE_CLOCK_CORRECTION,
}


@dataclass(frozen=True)
class InjectedFault:
    scenario: Scenario
    fault: Fault


@dataclass(frozen=True)
class Detection:
    """A fault's alarm: the first of its kind about its target opened at or after its onset."""

    scenario: Scenario
    fault: Fault
    onset_s: float
    alarm: Alarm | None

    @property
    def seconds(self) -> float | None:
        return None if self.alarm is None else self.alarm.opened_at - self.onset_s


def fault_layout(
    mesh: Mesh, seed: int, start_minute: int, calm: np.ndarray | None = None
) -> list[InjectedFault]:
    """One fault of each scenario from `start_minute` on, on targets drawn from `seed`; the
    link faults on links of `calm` (default: those not congestion prone)."""
    calm = ~mesh.congestion_prone if calm is None else calm
    rng = np.random.default_rng([seed, 41])
    sites = [int(site) for site in rng.permutation(len(mesh.site_names))]
    sane = [site for site in sites if site not in drifted_hosts(mesh)]
    firewall, cut, clock, lossy = sane[:4]
    free = [site for site in sites if site not in (firewall, cut, clock, lossy)]
    delayed = _calm_pair(mesh, calm, free, DELAY_LINK_MAX_MS)
    pairs = [_calm_pair(mesh, calm, free), _calm_pair(mesh, calm, free), delayed]
    name = mesh.site_names

    def link(pair: tuple[int, int]) -> str:
        return f"{name[pair[0]]}>{name[pair[1]]}"

    return [
        InjectedFault(Scenario.FIREWALL, Fault(FaultKind.FIREWALL, name[firewall], start_minute)),
        InjectedFault(Scenario.SITE_CUT, Fault(FaultKind.CUT_OFF, name[cut], start_minute)),
        InjectedFault(
            Scenario.CLOCK_OFFSET,
            Fault(FaultKind.CLOCK, name[clock], start_minute, CLOCK_OFFSET_MS),
        ),
        InjectedFault(
            Scenario.MULTIPLE_LINKS,
            Fault(FaultKind.LOSS, mesh.host_names[lossy], start_minute, LOSS_PERCENT),
        ),
        InjectedFault(
            Scenario.COMPLETE_LOSS, Fault(FaultKind.COMPLETE_LOSS, link(pairs[0]), start_minute)
        ),
        InjectedFault(
            Scenario.HIGH_LOSS, Fault(FaultKind.LOSS, link(pairs[1]), start_minute, LOSS_PERCENT)
        ),
        InjectedFault(
            Scenario.DELAY_STEP,
            Fault(FaultKind.DELAY, link(pairs[2]), start_minute, DELAY_STEP_MS),
        ),
    ]


def drifted_hosts(mesh: Mesh) -> set[int]:
    """The hosts the mesh gave a drifted clock: every link out of them carries an offset."""
    return {
        host
        for host in range(len(mesh.host_names))
        if np.all(mesh.clock_offset_ms[mesh.source == host] != 0)
    }


def expected_subjects(mesh: Mesh, planned: PlannedFault) -> set[str]:
    """The subjects the fault's alarm may have: the link, or its host or site."""
    hosts = planned.hosts
    if planned.target_kind is TargetKind.LINK:
        return {f"{mesh.host_names[hosts[0]]}{LINK_SEPARATOR}{mesh.host_names[hosts[1]]}"}
    return {mesh.host_names[hosts[0]], mesh.site_names[hosts[0]]}


def detect(
    events: Sequence[AlarmEvent],
    scenario: Scenario,
    planned: PlannedFault,
    mesh: Mesh,
    onset_s: float,
) -> Detection:
    subjects = expected_subjects(mesh, planned)
    kind = EXPECTED_KIND[scenario]
    alarm = next(
        (
            event.alarm
            for event in events
            if event.action == "open"
            and event.alarm.kind is kind
            and event.alarm.subject in subjects
            and event.at >= onset_s
        ),
        None,
    )
    return Detection(scenario, planned.fault, onset_s, alarm)


@dataclass(frozen=True)
class SimulatedTruth:
    """What the simulator made each link do, minute by minute from `first_minute`."""

    mesh: Mesh
    first_minute: int
    utilisation: np.ndarray
    loss: np.ndarray

    @classmethod
    def of(cls, mesh: Mesh, first_minute: int, utilisation: np.ndarray) -> SimulatedTruth:
        blocked = blocking_probability(utilisation, mesh.queue_places[:, None])
        loss = 1 - (1 - blocked) * (1 - mesh.background_loss[:, None])
        return cls(mesh, first_minute, utilisation, loss)

    def explains(self, alarm: Alarm, settle_seconds: float) -> bool:
        """Whether the simulated physics (no fault) made the alarm's condition true over the
        minutes that opened it (a run of minutes, or AAAS's day): the mean loss probability
        of a link at the loss threshold; a queue raising the delay (load >= 80 %) or a load
        above 70 % in at least half of them; a clock beyond AAAS's correction. A silent link
        never is (the simulator publishes every link)."""
        rows = self.rows(alarm)
        first = int(alarm.started_at // 60) - self.first_minute
        last = int((alarm.opened_at - settle_seconds) // 60) - 1 - self.first_minute
        minutes = slice(max(first, 0), max(last, first) + 1)
        kind = alarm.kind
        loss = self.loss[rows, minutes]
        if kind in (AlarmKind.HIGH_PACKET_LOSS, AlarmKind.HIGH_PACKET_LOSS_MULTIPLE):
            return bool(loss.size) and bool((loss.mean(axis=1) >= HIGH_LOSS).any())
        if kind in (AlarmKind.COMPLETE_PACKET_LOSS, AlarmKind.FIREWALL_ISSUE):
            return bool(loss.size) and bool((loss.mean(axis=1) >= COMPLETE).any())
        if kind is AlarmKind.HIGH_DELAY:
            return _mostly(self.utilisation[rows, minutes] >= QUEUEING_UTILISATION)
        if kind is AlarmKind.SUSTAINED_CONGESTION:
            return _mostly(self.utilisation[rows, minutes] > CONGESTED_UTILISATION)
        if kind is AlarmKind.LARGE_CLOCK_CORRECTION:
            return any(abs(self._correction(host)) > CLOCK_CORRECTION_MS for host in alarm.hosts)
        return False

    def rows(self, alarm: Alarm) -> list[int]:
        """The mesh rows of the links an alarm is about."""
        hosts = {ip: index for index, ip in enumerate(self.mesh.host_ips)}
        pairs = {
            (s, d): row
            for row, (s, d) in enumerate(
                zip(self.mesh.source.tolist(), self.mesh.destination.tolist(), strict=True)
            )
        }
        return [pairs[(hosts[s], hosts[d])] for s, d in alarm.links]

    def _correction(self, host_name: str) -> float:
        """AAAS's correction of a host's clock from the mesh's own offsets: (mean offset of
        its links out - mean of its links in) / 2."""
        host = self.mesh.host_names.index(host_name)
        out = self.mesh.clock_offset_ms[self.mesh.source == host].mean()
        into = self.mesh.clock_offset_ms[self.mesh.destination == host].mean()
        return float(out - into) / 2


def _mostly(held: np.ndarray) -> bool:
    """The condition held on some link in at least half of the minutes."""
    return bool(held.size) and bool((held.mean(axis=1) >= 0.5).any())


def _calm_pair(
    mesh: Mesh, calm: np.ndarray, free: list[int], max_base_ms: float = np.inf
) -> tuple[int, int]:
    """The first link (in `free`'s order) of `calm` between two sites of `free` that joins two
    sane clocks and has a base delay below `max_base_ms`; both sites leave `free`."""
    for source in free:
        for destination in free:
            row = (mesh.source == source) & (mesh.destination == destination)
            if row.any() and calm[row].all() and not mesh.clock_offset_ms[row].any():
                if mesh.base_delay_ms[row].max() < max_base_ms:
                    free.remove(source)
                    free.remove(destination)
                    return source, destination
    raise ValueError(f"no calm link below {max_base_ms} ms between the sites left")
