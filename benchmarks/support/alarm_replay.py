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

With `results`, the feed also publishes the mesh's throughput tests and traceroutes as the demo
feed does (three weeks of throughput history with the first minute, then each test in the
minute it starts), and the cycle hands their results to the alarms; without `delay_loss` it
publishes those alone (days of a mesh's throughput tests replay in minutes), and `run` may
recompute every few minutes only.
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
from simulation.bus_format import Message
from simulation.demo_feed import (
    PUBLISH_LAG_S,
    demo_minute,
    history_messages,
    minute_messages,
    result_messages,
    simulate_demo_minute,
    simulate_demo_tests,
)
from simulation.faults import (
    Fault,
    FaultedMinute,
    FaultPlan,
    apply_faults,
    apply_test_faults,
    plan_faults,
)
from simulation.mesh_inventory import build_cric_export
from simulation.simulator import Mesh, build_mesh, simulate_utilisation
from simulation.throughput_traces import MeshRoutes, build_routes


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
    #: The mesh's routes when its throughput tests and traceroutes are published (None: not).
    routes: MeshRoutes | None = None
    #: Whether the minutes' delay and loss are published.
    delay_loss: bool = True
    next_minute: int = 0

    def __post_init__(self) -> None:
        self.next_minute = self.first_minute
        for profile, book in self.books.items():
            self.events[profile] = []
            book.add_listener(self.events[profile].append)

    def run(self, minutes: int, cycle_every: int = 1) -> None:
        """Replay the next `minutes` minutes, recomputing after every `cycle_every`-th (and the
        last): the alarms catch up on the minutes in between (at most the 32-minute window)."""
        last = self.next_minute + minutes - 1
        for minute in range(self.next_minute, last + 1):
            self.clock.now = (minute + 1) * 60 + PUBLISH_LAG_S
            self.pipeline.handle_frames(self._frames(minute))
            if (minute - self.first_minute + 1) % cycle_every == 0 or minute == last:
                self.clock.now = (minute + 1) * 60 + max(self.settle_seconds, PUBLISH_LAG_S)
                self.cycle.recompute()
        self.next_minute += minutes

    def _frames(self, minute: int) -> list[Frame]:
        elapsed = minute - self.first_minute
        messages: list[Message] = []
        if self.routes is not None and minute == self.first_minute:
            messages += history_messages(self.mesh, self.seed, minute, self.clock.now)
        if not self.delay_loss:
            if self.routes is not None:
                tests = simulate_demo_tests(self.mesh, self.seed, minute)
                tests = apply_test_faults(tests, self.routes, self.plan, elapsed)
                messages += result_messages(self.mesh, tests, self.routes, self.clock.now)
        elif self.routes is not None:
            measured, tests = demo_minute(self.mesh, self.seed, minute)
            faulted = apply_faults(measured, self.plan, elapsed, tests, self.routes)
            messages += self._observed(faulted)
        else:
            measured = simulate_demo_minute(self.mesh, self.seed, minute)
            messages += self._observed(apply_faults(measured, self.plan, elapsed))
        return [(headers["destination"], orjson.dumps(body), None) for headers, body in messages]

    def _observed(self, faulted: FaultedMinute) -> list[Message]:
        for observe in self.minute_observers:
            observe(faulted)
        return minute_messages(self.mesh, faulted, self.clock.now, self.routes)


def build_replay(
    sites: int,
    seed: int,
    faults: Sequence[Fault],
    first_minute: int,
    profiles: Sequence[AlarmProfile],
    predictor: UtilisationPredictor | None,
    results: bool = False,
    delay_loss: bool = True,
) -> MeshReplay:
    """The demo mesh of (`sites`, `seed`) with `faults` from `first_minute` on: the topology
    its CRIC export gives `nettel serve`, the pipeline on the service's topics, the matrix cycle
    with `predictor`, and the alarm service of each of `profiles` observing the cycle; with
    `results` the mesh's throughput tests and traceroutes too, without `delay_loss` only them."""
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
    routes = build_routes(mesh, seed) if results else None
    return MeshReplay(
        mesh,
        seed,
        plan,
        first_minute,
        clock,
        pipeline,
        cycle,
        books,
        settle,
        routes=routes,
        delay_loss=delay_loss,
    )


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
