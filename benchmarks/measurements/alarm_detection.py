"""Network alarms on replays with injected faults: time from fault onset to alarm, alarms on a
fault-free day, and the short profile against AAAS's windows."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult, median
from benchmarks.support.alarm_replay import MeasuredReplay, replay_mesh
from benchmarks.support.alarm_scenarios import (
    EXPECTED_KIND,
    Detection,
    Scenario,
    detect,
)
from service.alarms.records import Alarm, AlarmKind
from service.config import AlarmProfile

NAME = "alarm_detection"
SITES = 20
#: The replays start at a UTC midnight (2024-10-04), so AAAS's days are whole days.
FIRST_MINUTE = 28_800_000
#: Minutes the fault phase of the short profile is replayed for.
SHORT_FAULT_MINUTES = 30
SHORT: AlarmProfile = "short"
AAAS: AlarmProfile = "aaas"
#: Targets: median minutes from onset to alarm.
LOSS_TARGET_MIN = 5.0
DELAY_TARGET_MIN = 10.0
FALSE_ALARMS_TARGET = 1.0
TARGETS: dict[Scenario, float] = {
    Scenario.COMPLETE_LOSS: LOSS_TARGET_MIN,
    Scenario.HIGH_LOSS: LOSS_TARGET_MIN,
    Scenario.MULTIPLE_LINKS: LOSS_TARGET_MIN,
    Scenario.FIREWALL: LOSS_TARGET_MIN,
    Scenario.SITE_CUT: LOSS_TARGET_MIN,
    Scenario.DELAY_STEP: DELAY_TARGET_MIN,
}
METHOD = (
    f"The demo mesh ({SITES} sites, 380 directed links, `nettel simulate`'s family A) is replayed "
    "minute by minute on a simulated clock through nettel's own parts: the demo feed's bus "
    "messages as JSON frames into the ingest pipeline and link state (sites from the mesh's "
    "CRIC export), one matrix cycle per minute with the shipped model, and the alarm service "
    "as the cycle's analysis observer, once per profile (`benchmarks/support/alarm_replay.py`). "
    "Minute M's messages arrive 3 s after it ends (the demo feed's lag) and the cycle runs once "
    "the minute has settled (`--alarm-settle-seconds`, 30 s), so times are the earliest the "
    "service raises an alarm; a real service's cycle may run up to `--interval` (10 s) later. "
    "Faults (`simulation/faults.py`; `benchmarks/support/alarm_scenarios.py`): per seed one of "
    "each kind at once on targets drawn from the seed: complete loss, 5 % loss and a 30 ms "
    "delay step on three links between distinct sites that are not congestion prone, a "
    "firewall (every probe into the site lost), a site cut off (its links publish nothing), a "
    "clock 150 ms ahead and 5 % loss on every link of a host, each on its own site. Seed 0 "
    "replays a fault-free UTC day first (alarms on it are counted per 1,000 link-days; an "
    "alarm counts as false unless the simulator's own physics made its condition true over "
    "most of the minutes that opened it: loss at the threshold, a load >= 80 % for a delay, > "
    "70 % for congestion), then the faults from the next midnight for a day (AAAS judges a UTC "
    "day once it has ended); seeds 1.. replay a warm-up and the faults' first "
    f"{SHORT_FAULT_MINUTES} minutes. A fault's time to alarm is from its onset to the first "
    "alarm of its kind about its target (the link, or the host or site) opened at or after it."
)


@dataclass(frozen=True)
class OtherAlarm:
    """An alarm opened in a fault phase that is no fault's alarm."""

    kind: AlarmKind
    subject: str
    #: The fault whose link, host or site it is about, if any.
    near: Scenario | None
    #: Whether the simulated physics (no fault) explain it.
    explained: bool


@dataclass(frozen=True)
class SeedOutcome:
    seed: int
    detections: dict[AlarmProfile, list[Detection]]
    other_alarms: dict[AlarmProfile, list[OtherAlarm]]


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    calm_minutes = round(sizes.alarm_calm_hours * 60)
    aaas_minutes = 1440 + 2 if not ctx.quick else 0
    ctx.log(f"{NAME}: seed 0, {calm_minutes} fault-free minutes, then the faults")
    long = _replay_seed(ctx, 0, calm_minutes, max(SHORT_FAULT_MINUTES, aaas_minutes))
    outcomes = [_outcome(long)]
    calm = _calm_alarms(long, calm_minutes)
    for seed in range(1, sizes.alarm_seeds):
        ctx.log(f"{NAME}: seed {seed}")
        replay = _replay_seed(ctx, seed, sizes.alarm_warmup_minutes, SHORT_FAULT_MINUTES)
        outcomes.append(_outcome(replay))
    return _result(ctx, outcomes, calm, long, aaas_measured=aaas_minutes > 0)


def _replay_seed(
    ctx: SuiteContext, seed: int, before_minutes: int, fault_minutes: int
) -> MeasuredReplay:
    profiles = (SHORT, AAAS) if seed == 0 and not ctx.quick else (SHORT,)
    return replay_mesh(SITES, seed, FIRST_MINUTE, before_minutes, fault_minutes, profiles)


def _outcome(replay: MeasuredReplay) -> SeedOutcome:
    mesh, planned_faults = replay.replay.mesh, replay.replay.plan.faults
    scenarios = [injected.scenario for injected in replay.faults]
    detections: dict[AlarmProfile, list[Detection]] = {}
    others: dict[AlarmProfile, list[OtherAlarm]] = {}
    for profile, events in replay.replay.events.items():
        found = [
            detect(events, scenario, planned, mesh, replay.onset_s)
            for scenario, planned in zip(scenarios, planned_faults, strict=True)
        ]
        detections[profile] = found
        theirs = {d.alarm.id for d in found if d.alarm is not None}
        others[profile] = [
            _other(replay, event.alarm, scenarios)
            for event in events
            if event.action == "open" and event.alarm.started_at >= replay.onset_s
            and event.alarm.id not in theirs
        ]  # fmt: skip
    return SeedOutcome(replay.replay.seed, detections, others)


def _other(replay: MeasuredReplay, alarm: Alarm, scenarios: list[Scenario]) -> OtherAlarm:
    """An alarm is near a fault when it is about one of the fault's links, or its subject is
    the fault's host or site."""
    mesh = replay.replay.mesh
    rows = replay.truth.rows(alarm)
    near = None
    for scenario, planned in zip(scenarios, replay.replay.plan.faults, strict=True):
        names = {name for h in planned.hosts for name in (mesh.site_names[h], mesh.host_names[h])}
        if planned.links[rows].any() or alarm.subject in names:
            near = scenario
            break
    explained = replay.truth.explains(alarm, replay.replay.settle_seconds)
    return OtherAlarm(alarm.kind, alarm.subject, near, explained)


@dataclass(frozen=True)
class CalmAlarms:
    link_days: float
    #: Per profile: (alarm, explained by the simulated physics?).
    alarms: dict[AlarmProfile, list[tuple[Alarm, bool]]]


def _calm_alarms(replay: MeasuredReplay, calm_minutes: int) -> CalmAlarms:
    end = replay.onset_s
    link_days = replay.replay.mesh.n_links * calm_minutes / 1440
    settle = replay.replay.settle_seconds
    alarms = {
        profile: [
            (e.alarm, replay.truth.explains(e.alarm, settle))
            for e in events
            if e.action == "open" and e.alarm.started_at < end
        ]
        for profile, events in replay.replay.events.items()
    }
    return CalmAlarms(link_days, alarms)


def _result(
    ctx: SuiteContext,
    outcomes: list[SeedOutcome],
    calm: CalmAlarms,
    long: MeasuredReplay,
    aaas_measured: bool,
) -> MeasurementResult:
    result = MeasurementResult(NAME, "Network alarms: time to alarm and false alarms", METHOD)
    result.add("seeds", "seeds (fault sets)", len(outcomes))
    for scenario in Scenario:
        minutes = [
            seconds / 60
            for outcome in outcomes
            for d in outcome.detections[SHORT]
            if d.scenario is scenario and (seconds := d.seconds) is not None
        ]
        key = scenario.name.lower()
        result.add(f"{key}_detected", f"{scenario}: faults alarmed", len(minutes))
        value = result.add(
            f"{key}_median_min", f"{scenario}: median onset -> alarm", median(minutes), "min"
        )
        if minutes:
            result.add(f"{key}_max_min", f"{scenario}: slowest onset -> alarm", max(minutes), "min")
        if scenario in TARGETS:
            label = f"{scenario} ({EXPECTED_KIND[scenario]}): median onset -> alarm"
            result.target(f"{key}_median_min", label, value, "<=", TARGETS[scenario], "min")
    _add_calm(result, calm)
    _add_other_alarms(result, outcomes)
    if aaas_measured:
        _add_aaas(result, outcomes[0], long)
    result.details.update(_details(outcomes, calm))
    return result


def _add_calm(result: MeasurementResult, calm: CalmAlarms) -> None:
    result.add("calm_link_days", "fault-free link-days replayed", calm.link_days)
    for profile, alarms in calm.alarms.items():
        false = [alarm for alarm, explained in alarms if not explained]
        per = 1000 / calm.link_days
        result.add(
            f"{profile}_calm_alarms_per_1000_link_days",
            f"{profile} profile: alarms per 1,000 fault-free link-days (any)",
            len(alarms) * per,
        )
        value = result.add(
            f"{profile}_false_alarms_per_1000_link_days",
            f"{profile} profile: false alarms per 1,000 fault-free link-days",
            len(false) * per,
        )
        if profile == SHORT:
            result.target(
                f"{profile}_false_alarms_per_1000_link_days",
                "false alarms per 1,000 link-days of the fault-free demo mesh",
                value,
                "<=",
                FALSE_ALARMS_TARGET,
            )
        kinds = Counter((alarm.kind.value, explained) for alarm, explained in alarms)
        text = ", ".join(
            f"{kind} {'explained' if explained else 'false'} {count}"
            for (kind, explained), count in sorted(kinds.items())
        )
        result.notes.append(f"{profile} profile, fault-free day: {text or 'no alarm'}")


def _add_other_alarms(result: MeasurementResult, outcomes: list[SeedOutcome]) -> None:
    """Alarms a fault raised besides its own (on its target), and alarms elsewhere in the fault
    phases, false unless the simulated physics explain them."""
    others = [other for outcome in outcomes for other in outcome.other_alarms[SHORT]]
    near = Counter(
        (other.near.value, other.kind.value, other.explained) for other in others if other.near
    )
    elsewhere = Counter(
        (other.kind.value, other.explained) for other in others if other.near is None
    )
    result.add(
        "fault_side_alarms",
        "short profile: other alarms on the faults' links, hosts or sites that the physics do "
        "not explain (all seeds)",
        sum(count for (_, _, explained), count in near.items() if not explained),
    )
    result.add(
        "fault_phase_false_alarms",
        "short profile: false alarms elsewhere in the fault phases (all seeds)",
        sum(count for (_, explained), count in elsewhere.items() if not explained),
    )
    text = ", ".join(
        f"{kind} on the {fault}'s target {count} ({'explained' if explained else 'by the fault'})"
        for (fault, kind, explained), count in sorted(near.items())
    )
    result.notes.append(f"short profile, other alarms on the faults' targets: {text or 'none'}")
    text = ", ".join(
        f"{kind} {'explained' if explained else 'false'} {count}"
        for (kind, explained), count in sorted(elsewhere.items())
    )
    result.notes.append(f"short profile, alarms elsewhere in the fault phases: {text or 'none'}")


def _add_aaas(result: MeasurementResult, outcome: SeedOutcome, long: MeasuredReplay) -> None:
    for detection in outcome.detections[AAAS]:
        key = detection.scenario.name.lower()
        seconds = detection.seconds
        result.add(
            f"aaas_{key}_hours",
            f"aaas profile, seed 0: {detection.scenario} onset -> alarm",
            None if seconds is None else seconds / 3600,
            "h",
        )
    for phase, faulted in (("fault-free day", False), ("day of faults", True)):
        short = _raised(long, SHORT, faulted)
        aaas = _raised(long, AAAS, faulted)
        key = "faults" if faulted else "calm"
        result.add(
            f"both_{key}", f"seed 0, {phase}: alarms both profiles raised", len(short & aaas)
        )
        for name, only in (("short", short - aaas), ("aaas", aaas - short)):
            result.add(f"{name}_only_{key}", f"seed 0, {phase}: {name} profile only", len(only))
            kinds = Counter(kind.value for kind, _ in only)
            text = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
            result.notes.append(f"seed 0, {phase}, {name} profile only: {text or 'none'}")
        result.details[f"profiles_{key}"] = {
            "both": sorted(f"{k.value}: {s}" for k, s in short & aaas),
            "short_only": sorted(f"{k.value}: {s}" for k, s in short - aaas),
            "aaas_only": sorted(f"{k.value}: {s}" for k, s in aaas - short),
        }


def _raised(
    replay: MeasuredReplay, profile: AlarmProfile, faulted: bool
) -> set[tuple[AlarmKind, str]]:
    """(kind, subject) of the alarms a profile opened whose condition began in the fault phase
    (`faulted`) or before it; a host named by its site (the demo mesh has one host per site:
    the short profile names a group by the site, the aaas profile by the host)."""
    mesh = replay.replay.mesh
    site_of = dict(zip(mesh.host_names, mesh.site_names, strict=True))
    return {
        (e.alarm.kind, site_of.get(e.alarm.subject, e.alarm.subject))
        for e in replay.replay.events[profile]
        if e.action == "open" and (e.alarm.started_at >= replay.onset_s) == faulted
    }


def _details(outcomes: list[SeedOutcome], calm: CalmAlarms) -> dict[str, Any]:
    return {
        "detections": [
            {
                "seed": outcome.seed,
                "profile": profile,
                "scenario": d.scenario.value,
                "fault": d.fault.describe(),
                "seconds": d.seconds,
                "alarm": None if d.alarm is None else d.alarm.to_json(),
            }
            for outcome in outcomes
            for profile, found in outcome.detections.items()
            for d in found
        ],
        "calm_alarms": {
            profile: [alarm.to_json() | {"explained": explained} for alarm, explained in alarms]
            for profile, alarms in calm.alarms.items()
        },
    }
