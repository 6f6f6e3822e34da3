"""A demo mesh replayed with injected faults through the service's own parts, on a simulated clock.

Each simulated minute goes the way `nettel simulate` sends it and `nettel serve` takes it: the
demo feed's bus messages (`simulation.demo_feed.minute_messages`, faults applied by
`simulation.faults`) as JSON frames into the ingest pipeline and link state, then one matrix
cycle, whose analysis observers are the alarm services (one per profile, as `nettel serve
--alarm-profile` builds it). Only the clock is simulated: minute M's messages arrive
PUBLISH_LAG_S after it ends (as the demo feed publishes them) and the cycle runs once the alarm
service takes minute M as settled (`--alarm-settle-seconds` after it ended), so an alarm's
`opened_at` is the first moment the service could have raised it; the real service's cycle runs
at least every `--interval` (10 s), so it raises it up to that much later.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import orjson

from benchmarks.support.alarm_scenarios import InjectedFault, SimulatedTruth, fault_layout
from service.alarms.book import AlarmBook
from service.alarms.records import AlarmEvent
from service.alarms.service import AlarmService
from service.analysis.predictor import UtilisationPredictor
from service.config import AlarmProfile, Settings
from service.ingest.pipeline import Frame, IngestPipeline
from service.matrix.cycle import AnalysisObserver, CycleObservers, MatrixCycle
from service.runtime import load_model_slot, topic_kinds
from service.state.link_state import LinkState
from service.topology.layouts import parse_topology
from simulation.demo_feed import PUBLISH_LAG_S, minute_messages, simulate_demo_minute
from simulation.faults import Fault, FaultedMinute, FaultPlan, apply_faults, plan_faults
from simulation.mesh_inventory import build_cric_export
from simulation.simulator import Mesh, build_mesh, simulate_utilisation


class SimulatedClock:
    """Epoch seconds that move only when the replay moves them."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class MeshReplay:
    """One mesh, its faults and the service parts it runs through; `events` collects what each
    alarm book (by profile) recorded, in order."""

    mesh: Mesh
    seed: int
    plan: FaultPlan
    #: The epoch minute the faults' minutes count from (the first minute replayed).
    first_minute: int
    clock: SimulatedClock
    pipeline: IngestPipeline
    cycle: MatrixCycle
    books: dict[AlarmProfile, AlarmBook]
    settle_seconds: float
    events: dict[AlarmProfile, list[AlarmEvent]] = field(default_factory=dict)
    #: Told of each minute as the feed publishes it (faults applied), before it is ingested.
    minute_observers: list[Callable[[FaultedMinute], None]] = field(default_factory=list)
    next_minute: int = 0

    def __post_init__(self) -> None:
        self.next_minute = self.first_minute
        for profile, book in self.books.items():
            self.events[profile] = []
            book.add_listener(self.events[profile].append)

    def run(self, minutes: int) -> None:
        """Replay the next `minutes` minutes."""
        for minute in range(self.next_minute, self.next_minute + minutes):
            self.clock.now = (minute + 1) * 60 + PUBLISH_LAG_S
            self.pipeline.handle_frames(self._frames(minute))
            self.clock.now = (minute + 1) * 60 + max(self.settle_seconds, PUBLISH_LAG_S)
            self.cycle.recompute()
        self.next_minute += minutes

    def _frames(self, minute: int) -> list[Frame]:
        measured = simulate_demo_minute(self.mesh, self.seed, minute)
        faulted = apply_faults(measured, self.plan, minute - self.first_minute)
        for observe in self.minute_observers:
            observe(faulted)
        messages = minute_messages(self.mesh, faulted, self.clock.now)
        return [(headers["destination"], orjson.dumps(body), None) for headers, body in messages]


def build_replay(
    sites: int,
    seed: int,
    faults: Sequence[Fault],
    first_minute: int,
    profiles: Sequence[AlarmProfile],
    predictor: UtilisationPredictor | None,
) -> MeshReplay:
    """The demo mesh of (`sites`, `seed`) with `faults` from `first_minute` on: the topology
    its CRIC export gives `nettel serve`, the pipeline on the service's topics, the matrix cycle
    with `predictor`, and the alarm service of each of `profiles` observing the cycle."""
    mesh = build_mesh(sites, seed)
    plan = plan_faults(mesh, faults)
    _, topology = parse_topology(build_cric_export(mesh))
    clock = SimulatedClock(first_minute * 60.0)
    state = LinkState(topology)
    settings = Settings(publish_telemetry=False)
    pipeline = IngestPipeline(state, topic_kinds(settings), clock=clock)
    books: dict[AlarmProfile, AlarmBook] = {}
    observers: list[AnalysisObserver] = []
    for profile in profiles:
        alarms = AlarmService.build(Settings(publish_telemetry=False, alarm_profile=profile))
        if alarms is None:
            raise ValueError("the alarm settings turn alarms off")
        books[profile] = alarms.book
        observers.append(alarms.after_cycle)
    cycle = MatrixCycle(
        state,
        settings.interval,
        predictor,
        clock=clock,
        observers=CycleObservers(analysed=tuple(observers)),
    )
    settle = settings.alarm_settle_seconds
    return MeshReplay(mesh, seed, plan, first_minute, clock, pipeline, cycle, books, settle)


@dataclass(frozen=True)
class MeasuredReplay:
    """A replayed mesh with its faults (one of each scenario, from `onset_s`) and the truth of
    every minute replayed."""

    replay: MeshReplay
    faults: list[InjectedFault]
    onset_s: float
    truth: SimulatedTruth


def replay_mesh(
    sites: int,
    seed: int,
    first_minute: int,
    before_minutes: int,
    fault_minutes: int,
    profiles: Sequence[AlarmProfile],
) -> MeasuredReplay:
    """`before_minutes` fault-free minutes of the demo mesh from `first_minute`, then
    `fault_minutes` with one fault of each scenario (`fault_layout`), scored by the shipped
    model."""
    mesh = build_mesh(sites, seed)
    injected = fault_layout(mesh, seed, before_minutes)
    slot = load_model_slot(Settings())
    predictor = slot.current if slot is not None else None
    faults = [item.fault for item in injected]
    replay = build_replay(sites, seed, faults, first_minute, profiles, predictor)
    minutes = before_minutes + fault_minutes
    replay.run(minutes)
    utilisation = simulate_utilisation(mesh, first_minute, minutes, seed)
    truth = SimulatedTruth.of(mesh, first_minute, utilisation)
    onset = float((first_minute + before_minutes) * 60)
    return MeasuredReplay(replay, injected, onset, truth)
