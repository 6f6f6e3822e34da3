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
recompute every few minutes only. With `minutes_per_message`, each link's delay and loss of
up to that many minutes (never past a recompute) arrive in one message each when the last of
them is published, as a collector's backlog brings them: the same datapoints in fewer
messages, for replays of days.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
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
from simulation.bus_format import Message, build_delay_message, build_loss_message
from simulation.demo_feed import (
    PUBLISH_LAG_S,
    history_messages,
    minute_messages,
    result_messages,
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
from simulation.simulator import Mesh, build_mesh, simulate_minute, simulate_utilisation
from simulation.throughput_traces import MeshRoutes, build_routes, simulate_tests


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
    #: Minutes each link's delay and loss messages carry at most (1: one message per minute, as
    #: the demo feed sends them; more: as a collector's backlog brings them).
    minutes_per_message: int = 1
    next_minute: int = 0
    #: The utilisation of the hour being replayed: its first minute, links x minutes.
    _hour: tuple[int, np.ndarray] = field(init=False, repr=False, default=(0, np.zeros((0, 0))))

    def __post_init__(self) -> None:
        self.next_minute = self.first_minute
        for profile, book in self.books.items():
            self.events[profile] = []
            book.add_listener(self.events[profile].append)

    def run(self, minutes: int, cycle_every: int = 1) -> None:
        """Replay the next `minutes` minutes, recomputing after every `cycle_every`-th (and the
        last): the alarms catch up on the minutes in between (at most the 32-minute window).
        Minutes reach the pipeline in batches of up to `minutes_per_message`, each ending at a
        recompute at the latest."""
        last = self.next_minute + minutes - 1
        batch: list[int] = []
        for minute in range(self.next_minute, last + 1):
            batch.append(minute)
            recompute = (minute - self.first_minute + 1) % cycle_every == 0 or minute == last
            if recompute or len(batch) == self.minutes_per_message:
                self.clock.now = (minute + 1) * 60 + PUBLISH_LAG_S
                self.pipeline.handle_frames(self._frames(batch))
                batch = []
            if recompute:
                self.clock.now = (minute + 1) * 60 + max(self.settle_seconds, PUBLISH_LAG_S)
                self.cycle.recompute()
        self.next_minute += minutes

    def _frames(self, minutes: list[int]) -> list[Frame]:
        messages: list[Message] = []
        if self.routes is not None and minutes[0] == self.first_minute:
            messages += history_messages(self.mesh, self.seed, minutes[0], self.clock.now)
        published: list[FaultedMinute] = []
        for minute in minutes:
            elapsed = minute - self.first_minute
            utilisation = self._utilisation(minute)
            tests = None
            if self.routes is not None:
                tests = simulate_tests(self.mesh, self.seed, minute, utilisation)
                if not self.delay_loss:
                    tests = apply_test_faults(tests, self.routes, self.plan, elapsed)
                    messages += result_messages(self.mesh, tests, self.routes, self.clock.now)
            if self.delay_loss:
                measured = simulate_minute(self.mesh, utilisation, minute, self.seed)
                faulted = apply_faults(measured, self.plan, elapsed, tests, self.routes)
                for observe in self.minute_observers:
                    observe(faulted)
                published.append(faulted)
        if len(published) == 1:
            messages += minute_messages(self.mesh, published[0], self.clock.now, self.routes)
        elif published:
            messages += _backlog_messages(self.mesh, published, self.clock.now, self.routes)
        return [(headers["destination"], orjson.dumps(body), None) for headers, body in messages]

    def _utilisation(self, minute: int) -> np.ndarray:
        """The demo feed's utilisation of `minute` (`demo_minute`'s), simulated an hour at a
        time: each column equals the minute's own."""
        first, hour = self._hour
        if not first <= minute < first + hour.shape[1]:
            first = minute - minute % 60
            hour = simulate_utilisation(self.mesh, first, 60, self.seed)
            self._hour = (first, hour)
        return hour[:, minute - first]


def _backlog_messages(
    mesh: Mesh, minutes: Sequence[FaultedMinute], sent_at: float, routes: MeshRoutes | None
) -> list[Message]:
    """`minute_messages` of several minutes with each link's delay and loss in one message
    each (a datapoint per minute it published), then the minutes' tests and traceroutes."""
    messages = []
    losses = [m.measurements.loss.tolist() for m in minutes]
    for link in range(mesh.n_links):
        published = [
            (m.measurements, loss)
            for m, loss in zip(minutes, losses, strict=True)
            if m.published[link]
        ]
        delays = {m.timestamp: h for m, _ in published if (h := m.histogram(link))}
        if delays:
            messages.append(build_delay_message(mesh, link, delays, sent_at=sent_at))
        if published:
            loss = {m.timestamp: loss[link] for m, loss in published}
            messages.append(build_loss_message(mesh, link, loss, sent_at=sent_at))
    if routes is not None:
        for minute in minutes:
            if minute.tests is not None:
                messages += result_messages(mesh, minute.tests, routes, sent_at)
    return messages


def build_replay(
    sites: int,
    seed: int,
    faults: Sequence[Fault],
    first_minute: int,
    profiles: Sequence[AlarmProfile],
    predictor: UtilisationPredictor | None,
    results: bool = False,
    delay_loss: bool = True,
    minutes_per_message: int = 1,
) -> MeshReplay:
    """The demo mesh of (`sites`, `seed`) with `faults` from `first_minute` on: the topology
    its CRIC export gives `nettel serve`, the pipeline on the service's topics, the matrix cycle
    with `predictor`, and the alarm service of each of `profiles` observing the cycle; with
    `results` the mesh's throughput tests and traceroutes too, without `delay_loss` only them;
    each link's delay and loss messages carry up to `minutes_per_message` minutes."""
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
        minutes_per_message=minutes_per_message,
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
