"""Alarms on throughput tests and traceroutes: time from a path change, a site cut off and a
throughput drop in a replay to the alarm, and the alarms a fault-free mesh raises."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult, median
from benchmarks.sizes import FULL, QUICK
from benchmarks.support.alarm_replay import MeshReplay, build_replay
from service.alarms.grouping import LINK_SEPARATOR
from service.alarms.records import Alarm, AlarmKind
from service.config import Settings
from service.runtime import load_model_slot
from service.state.throughput_state import BIN_SECONDS
from simulation.faults import Fault, FaultKind
from simulation.simulator import Mesh, build_mesh
from simulation.throughput_traces import THROUGHPUT_EVERY_MINUTES, TRACE_EVERY_MINUTES

NAME = "result_alarms"
#: The path replays start at a UTC midnight (2024-10-04).
FIRST_MINUTE = 28_800_000
#: Fault-free minutes first: a link's path is established after three traces (20 minutes).
WARM_MINUTES = 40
FAULT_MINUTES = 45
DROP_PERCENT = 75.0
#: Where in a 4-day throughput bin (aligned to the epoch) a drop starts, as a share of the bin.
DROP_PHASES = (0.05, 0.2, 0.5, 0.85)
#: How long a throughput replay goes on after the drop without an alarm (days).
DROP_LIMIT_DAYS = 4.5
#: Throughput replays recompute every this many minutes (tests come every few hours).
DROP_CYCLE_MINUTES = 10
RESULT_KINDS = {
    AlarmKind.BANDWIDTH_DECREASED,
    AlarmKind.BANDWIDTH_DECREASED_MULTIPLE,
    AlarmKind.BANDWIDTH_INCREASED,
    AlarmKind.BANDWIDTH_INCREASED_MULTIPLE,
    AlarmKind.PATH_CHANGED,
    AlarmKind.DESTINATION_UNREACHABLE_ANY,
    AlarmKind.DESTINATION_UNREACHABLE_MULTIPLE,
}
METHOD = (
    f"The demo mesh ({FULL.result_alarm_sites} sites, 380 directed links; "
    f"{QUICK.result_alarm_sites} sites at quick sizes) is replayed on a simulated clock through "
    "nettel's own parts, as `alarm_detection` does (`benchmarks/support/alarm_replay.py`: the "
    "demo feed's bus messages into the ingest pipeline and link state, the matrix cycle with "
    "the shipped model, the alarm service of the short profile as its observer), with the "
    "mesh's throughput tests and traceroutes published as `nettel simulate` publishes them "
    f"(`simulation/throughput_traces.py`: a test every {THROUGHPUT_EVERY_MINUTES // 60} hours "
    f"and a traceroute every {TRACE_EVERY_MINUTES} minutes per pair, each link at its own "
    "phase; three weeks of throughput history with the first minute). Paths: per seed, "
    f"{WARM_MINUTES} fault-free minutes, then from one onset a `path-change` on one link, a "
    "`path-change` on every link of one site (in and out) and a `cut-off` of another site, "
    f"on targets drawn from the seed, replayed minute by minute for {FAULT_MINUTES} minutes. "
    "A fault's time to alarm is from its onset to the first alarm of its kind about its target "
    "(path changed: the link, or the site; destination cannot be reached: the cut-off site or "
    "its host) opened at or after it; any other alarm of these kinds counts as a false one. "
    f"Throughput: a drop of {DROP_PERCENT:g} % on one link (`throughput-drop`) starting at "
    "several points of a 4-day bin of the throughput history (epoch-aligned, as the state keeps "
    "it), the mesh's tests and traces replayed alone (no delay and loss: days replay in "
    f"minutes), a recompute every {DROP_CYCLE_MINUTES} minutes, until the alarm or "
    f"{DROP_LIMIT_DAYS:g} days."
)


@dataclass(frozen=True)
class PathFaults:
    link: Fault
    site: Fault
    cut: Fault


def run(ctx: SuiteContext) -> MeasurementResult:
    result = MeasurementResult(NAME, "Alarms on throughput tests and traceroutes", METHOD)
    slot = load_model_slot(Settings())
    predictor = slot.current if slot is not None else None
    sites = ctx.sizes.result_alarm_sites
    seeds = range(1) if ctx.quick else range(3)
    times: dict[str, list[float | None]] = {"link": [], "site": [], "cut": []}
    false_alarms: list[Alarm] = []
    rows = []
    for seed in seeds:
        ctx.log(f"result_alarms: path replay, seed {seed}")
        faults = path_faults(build_mesh(sites, seed), seed)
        found, others = path_replay(sites, seed, faults, predictor)
        for name, minutes in found.items():
            times[name].append(minutes)
        false_alarms += others
        rows.append([str(seed), *(_minutes(found[name]) for name in ("link", "site", "cut"))])
    labels = {
        "link": "path change on a link",
        "site": "path change on every link of a site (one alarm for the site)",
        "cut": "site cut off: destination cannot be reached from any",
    }
    for name, label in labels.items():
        seen = [t for t in times[name] if t is not None]
        result.add(
            f"{name}_detected", f"{label}: faults alarmed", f"{len(seen)} of {len(times[name])}"
        )
        result.add(
            f"{name}_median_min",
            f"{label}: median onset -> alarm",
            median(seen) if seen else None,
            "min",
        )
        result.add(
            f"{name}_max_min",
            f"{label}: slowest onset -> alarm",
            max(seen) if seen else None,
            "min",
        )
    phases = DROP_PHASES[:1] if ctx.quick else DROP_PHASES
    drop_rows = []
    hours: list[float] = []
    link_days = 0.0
    for phase in phases:
        ctx.log(f"result_alarms: throughput drop at {phase:.0%} of a bin")
        found_hours, others, days = drop_replay(sites, phase, predictor)
        false_alarms += others
        link_days += days * (sites * (sites - 1) - 1)
        label = f"throughput drop at {phase:.0%} of a 4-day bin: onset -> bandwidth decreased"
        result.add(f"drop_{round(phase * 100)}_hours", label, found_hours, "h")
        drop_rows.append(
            [
                f"{phase:.0%}",
                "not within 4.5 days" if found_hours is None else f"{found_hours:.1f} h",
            ]
        )
        if found_hours is not None:
            hours.append(found_hours)
    result.add("drop_detected", "throughput drops alarmed", f"{len(hours)} of {len(phases)}")
    result.add("calm_link_days", "fault-free link-days of the throughput replays", link_days)
    result.add(
        "false_result_alarms",
        "alarms of these kinds that are no fault's (all replays)",
        len(false_alarms),
    )
    result.details["tables"] = [
        {
            "title": "Onset -> alarm per seed (minutes)",
            "columns": ["seed", "path change, link", "path change, site", "site cut off"],
            "rows": rows,
        },
        {
            "title": f"Throughput drop of {DROP_PERCENT:g} %: onset -> bandwidth decreased",
            "columns": ["drop starts at (share of its 4-day bin)", "time to alarm"],
            "rows": drop_rows,
        },
    ]
    result.details["false_alarms"] = [f"{a.kind.value}: {a.subject}" for a in false_alarms]
    return result


def path_faults(mesh: Mesh, seed: int) -> PathFaults:
    """A changed link between two sites, a site whose links all change, a site cut off: five
    distinct sites drawn from the seed."""
    order = np.random.default_rng([seed, 43]).permutation(len(mesh.site_names))
    source, destination, changed, cut = (mesh.site_names[int(i)] for i in order[:4])
    return PathFaults(
        link=Fault(FaultKind.PATH_CHANGE, f"{source}>{destination}", WARM_MINUTES),
        site=Fault(FaultKind.PATH_CHANGE, changed, WARM_MINUTES),
        cut=Fault(FaultKind.CUT_OFF, cut, WARM_MINUTES),
    )


def path_replay(
    sites: int, seed: int, faults: PathFaults, predictor: object
) -> tuple[dict[str, float | None], list[Alarm]]:
    """Minutes from onset to each fault's alarm (None: none), and the other result alarms."""
    replay = build_replay(
        sites,
        seed,
        [faults.link, faults.site, faults.cut],
        FIRST_MINUTE,
        ("short",),
        predictor,  # type: ignore[arg-type]
        results=True,
    )
    replay.run(WARM_MINUTES + FAULT_MINUTES)
    onset = (FIRST_MINUTE + WARM_MINUTES) * 60.0
    mesh = replay.mesh
    source, destination = faults.link.target.split(">")
    link = _host_of(mesh, source) + LINK_SEPARATOR + _host_of(mesh, destination)
    expected = {
        "link": (AlarmKind.PATH_CHANGED, {link}),
        "site": (AlarmKind.PATH_CHANGED, {faults.site.target, _host_of(mesh, faults.site.target)}),
        "cut": (
            AlarmKind.DESTINATION_UNREACHABLE_ANY,
            {faults.cut.target, _host_of(mesh, faults.cut.target)},
        ),
    }
    opened = _opened(replay)
    found: dict[str, float | None] = {}
    claimed: set[str] = set()
    for name, (kind, subjects) in expected.items():
        alarm = next(
            (
                a
                for a in opened
                if a.kind is kind and a.subject in subjects and a.opened_at >= onset
            ),
            None,
        )
        found[name] = None if alarm is None else (alarm.opened_at - onset) / 60
        if alarm is not None:
            claimed.add(alarm.id)
    others = [a for a in opened if a.kind in RESULT_KINDS and a.id not in claimed]
    return found, others


def drop_replay(
    sites: int, phase: float, predictor: object
) -> tuple[float | None, list[Alarm], float]:
    """Hours from a throughput drop starting at `phase` of its 4-day bin to its alarm (None:
    none within the limit), the alarms of these kinds that are not its, and the days
    replayed."""
    bin_minutes = BIN_SECONDS // 60
    bin_start = (FIRST_MINUTE // bin_minutes + 1) * bin_minutes
    onset_minute = bin_start + round(phase * bin_minutes)
    first_minute = onset_minute - 60
    mesh = build_mesh(sites, 0)
    source, destination = path_faults(mesh, 0).link.target.split(">")
    fault = Fault(FaultKind.THROUGHPUT_DROP, f"{source}>{destination}", 60, DROP_PERCENT)
    replay = build_replay(
        sites, 0, [fault], first_minute, ("short",), predictor,  # type: ignore[arg-type]
        results=True, delay_loss=False,
    )  # fmt: skip
    link = _host_of(mesh, source) + LINK_SEPARATOR + _host_of(mesh, destination)
    onset = onset_minute * 60.0
    limit = 60 + int(DROP_LIMIT_DAYS * 1440)
    found: Alarm | None = None
    while found is None and replay.next_minute - first_minute < limit:
        replay.run(DROP_CYCLE_MINUTES * 6, cycle_every=DROP_CYCLE_MINUTES)
        found = next(
            (
                a
                for a in _opened(replay)
                if a.kind is AlarmKind.BANDWIDTH_DECREASED and a.subject == link
            ),
            None,
        )
    others = [a for a in _opened(replay) if a.kind in RESULT_KINDS and a is not found]
    days = (replay.next_minute - first_minute) / 1440
    return None if found is None else (found.opened_at - onset) / 3600, others, days


def _opened(replay: MeshReplay) -> list[Alarm]:
    return [event.alarm for event in replay.events["short"] if event.action == "open"]


def _host_of(mesh: Mesh, site: str) -> str:
    return mesh.host_names[mesh.site_names.index(site)]


def _minutes(value: float | None) -> str:
    return "none" if value is None else f"{value:.1f}"
