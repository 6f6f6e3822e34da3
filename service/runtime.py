"""Composition root of `nettel serve`: builds every part (state, ingest, the matrix cycle, model,
persistence, broker links, publishers and the metrics registry) and holds the running ones in one
ordered list (`running_parts`): started in order, stopped in reverse."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client import CollectorRegistry

from service.alarms.book import AlarmBook
from service.alarms.service import AlarmService
from service.analysis.predictor import ModelInfo
from service.broker.connection import BrokerAccess, Connector, TlsFiles
from service.broker.election import BrokerElection
from service.broker.lease import LeaseTiming
from service.config import Settings
from service.errors import ConfigError, ModelBundleError
from service.ingest.archive_backfill import ArchiveBackfill, BackfillSettings
from service.ingest.backlog import BacklogWatch, ingest_is_behind
from service.ingest.dns_cache import CachedResolver
from service.ingest.entry import IngestEntry
from service.ingest.frame_batcher import FrameBatcher
from service.ingest.link_admission import LinkAdmission
from service.ingest.parser_processes import ParserProcesses
from service.ingest.pipeline import IngestPipeline, Parser
from service.ingest.pscheduler_http import PschedulerIntake
from service.ingest.rate_limit import ClientRateLimiter
from service.ingest.source import Source
from service.ingest.stomp_source import StompSource, SubscriptionSpec
from service.lifecycle import Component, Hooks
from service.matrix.cycle import CycleObservers, MatrixCycle, ServedMatrix
from service.model.slot import ModelSlot
from service.parse.limits import InputLimits
from service.parse.records import MeasurementKind
from service.persistence.durability import Persistence
from service.persistence.journal import Journal
from service.persistence.snapshot_checks import ContentCheck
from service.persistence.snapshot_store import SnapshotStore
from service.persistence.state_dir_lock import StateDirLock
from service.persistence.warm_start import WarmOutcome, WarmSource, warm_start
from service.publish.http_guard import HttpGuard, http_limits
from service.publish.metrics.alarms import AlarmCollector
from service.publish.metrics.backfill import BackfillCollector
from service.publish.metrics.broker import BrokerCollector
from service.publish.metrics.build import BuildCollector
from service.publish.metrics.election import ElectionCollector
from service.publish.metrics.http import HttpCollector, register_stream_gauge
from service.publish.metrics.ingest import IngestCollector
from service.publish.metrics.links import LinkStateCollector
from service.publish.metrics.matrix import MatrixMetrics
from service.publish.metrics.model import register_model_metrics
from service.publish.metrics.persistence import PersistenceCollector
from service.publish.metrics.topology import TopologyCollector
from service.publish.metrics.warm_start import WarmStartCollector
from service.publish.publishers import Publishers, build_publishers
from service.publish.telemetry import TelemetryPublisher
from service.state.link_state import Admission, LinkState
from service.state.retirement import LinkRetirement
from service.topology.loading import LoadedTopology, load_topology
from service.topology.refresh import TopologyRefresher, log_loaded
from service.topology.topology import Topology


@dataclass
class Runtime:
    """The service's parts, every one given at construction by `build_runtime`; `start()` /
    `stop()` run `parts` (started in order, stopped in reverse)."""

    settings: Settings
    state: LinkState
    pipeline: IngestPipeline
    cycle: MatrixCycle
    batcher: FrameBatcher
    #: Where every source delivers (`service.ingest.entry`).
    entry: IngestEntry
    #: The inputs, in the order of `SOURCE_FACTORIES` (those configured).
    sources: tuple[Source, ...]
    publishers: Publishers
    #: The HTTP front door's limits and counts.
    http_guard: HttpGuard
    #: /metrics: one collector per part.
    registry: CollectorRegistry
    #: What runs, in start order (`running_parts`).
    parts: list[Component]
    model: ModelSlot | None = None
    persistence: Persistence | None = None
    parsers: ParserProcesses | None = None
    topology: TopologyRefresher | None = None
    election: BrokerElection | None = None
    #: Where --warm-from takes the state from at start (None without it).
    warm: WarmSource | None = None
    #: This process's hold on --state-dir (None without it).
    state_dir_lock: StateDirLock | None = None
    #: Which new links the state takes (--max-links, --new-links-per-minute).
    admission: LinkAdmission | None = None
    #: The /admin bearer token, read at start and on SIGHUP (None: admin endpoints disabled).
    admin_token: str | None = None
    #: The network alarms raised each cycle (None: --alarms false).
    alarms: AlarmBook | None = None
    started_at: float = field(default_factory=time.time)
    #: How --warm-from ended (None without it or before it ended).
    warm_outcome: WarmOutcome | None = None
    #: The content check that refused the warm state (outcome `rejected`).
    warm_rejected_check: ContentCheck | None = None
    #: When (monotonic) the warm start in progress began; None when none is.
    warm_since: float | None = None
    #: Why a part started after the warm start failed to start (None: none did).
    start_failure: str | None = None
    #: Called when a part started after the warm start fails to start (the lifespan ends the
    #: process then, as a failed start before serving would have).
    on_start_failure: Callable[[BaseException], object] | None = None
    _warm_thread: threading.Thread | None = field(default=None, init=False)
    _warm_cancel: threading.Event = field(default_factory=threading.Event, init=False)
    _start_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _stopping: bool = field(default=False, init=False)

    @property
    def bus(self) -> StompSource | None:
        """The bus subscription (None with --brokers none: pScheduler runs over HTTP only)."""
        return _source_of(self.sources, StompSource)

    @property
    def intake(self) -> PschedulerIntake | None:
        """What /ingest/pscheduler takes runs in with."""
        return _source_of(self.sources, PschedulerIntake)

    @property
    def backfill(self) -> ArchiveBackfill | None:
        """The archive backfill of --backfill-from (None without it)."""
        return _source_of(self.sources, ArchiveBackfill)

    def start(self) -> None:
        """Start `parts` in order; when one fails, stop those started (in reverse) and raise.

        With --warm-from, the parts up to the warm start start here and the warm start and the
        parts after it on a thread of their own (`_warm_then_start`), so that the HTTP server
        serves meanwhile (/readyz says why it is not ready)."""
        started: list[Component] = []
        try:
            for number, part in enumerate(self.parts):
                if part.name == WARM_START_PART and self.warm is not None:
                    self._start_warm(self.warm, self.parts[number + 1 :])
                    return
                part.start()
                started.append(part)
        except BaseException:
            for part in reversed(started):
                part.stop()
            raise

    def stop(self) -> None:
        """Stop `parts` in reverse: stop consuming, snapshot what was applied (acknowledging
        it), disconnect, then end the publishers. A warm start in progress is abandoned first
        (parts it did not start yet are stopped unstarted)."""
        with self._start_lock:
            self._stopping = True
        self._warm_cancel.set()
        if self._warm_thread is not None:
            self._warm_thread.join()
        for part in reversed(self.parts):
            part.stop()

    def _start_warm(self, warm: WarmSource, rest: list[Component]) -> None:
        self.warm_since = time.monotonic()
        self._warm_thread = threading.Thread(
            target=self._warm_then_start, args=(warm, rest), name="warm-start", daemon=True
        )
        self._warm_thread.start()

    def _warm_then_start(self, warm: WarmSource, rest: list[Component]) -> None:
        """The warm start, then the parts after it, in order (unless stopping meanwhile).

        It runs once subscribed (frames wait in the batcher, not yet started): the peer's state
        is taken and our journal replayed onto it. What is published meanwhile is not missed,
        and what the peer's state already holds is applied again, which stores the same minute
        in the same slot: no datapoint counts twice."""
        taken = self.fetch_warm_state(warm)
        with self._start_lock:
            if self._stopping:
                return
            self.adopt_warm_state(taken)
            self.warm_since = None
            started: list[Component] = []
            try:
                for part in rest:
                    part.start()
                    started.append(part)
            except BaseException as error:
                logging.getLogger("nettel").exception(
                    "start failed after the warm start", extra={"part": part.name}
                )
                for done in reversed(started):
                    done.stop()
                self.start_failure = f"{part.name} failed to start: {type(error).__name__}"
                if self.on_start_failure is not None:
                    self.on_start_failure(error)

    def fetch_warm_state(self, warm: WarmSource) -> LinkState | None:
        """The peer's state, checked against this replica's host bindings (None on failure,
        with `warm_outcome` and, for a refused content, `warm_rejected_check` set)."""
        with self.state.frozen():
            bindings = dict(self.state.index.ip_by_host_version)
        result = warm_start(
            warm, self.state.index.topology, bindings=bindings, cancelled=self._warm_cancel
        )
        self.warm_outcome, self.warm_rejected_check = result.outcome, result.check
        return result.state

    def adopt_warm_state(self, loaded: LinkState | None) -> None:
        if loaded is not None:
            self.state.adopt(loaded)
            if self.persistence is not None:
                self._replay_journal(self.persistence)

    def _replay_journal(self, persistence: Persistence) -> None:
        """Re-apply the journal before ingest starts: its links were admitted when they came
        (only --max-links applies again)."""
        if self.admission is None:
            persistence.replay_journal()
            return
        with self.admission.replaying():
            persistence.replay_journal()

    def reload_model(self) -> ModelInfo:
        """Re-read the model bundle without touching link state; ModelBundleError keeps the old."""
        if self.model is None:
            raise ModelBundleError("no model is configured (--model none)")
        info = self.model.reload()
        self.cycle.predictor = self.model.current
        return info

    def reload(self) -> None:
        """SIGHUP: re-read the topology (on its own thread), the token files and the model; a
        refused bundle, topology or token file is logged and the old one kept."""
        self.reload_tokens()
        if self.topology is not None:
            self.topology.request()
        try:
            self.reload_model()
        except ModelBundleError as error:
            logging.getLogger("nettel.model").error(
                "model reload refused", extra={"error": str(error)}
            )

    def reload_tokens(self) -> None:
        """SIGHUP: re-read the admin and ingest token files; a file that cannot be read keeps
        the token in use (logged). An endpoint disabled at start stays disabled."""
        log = logging.getLogger("nettel.auth")
        for name, read in (
            ("admin", self.settings.admin_bearer_token),
            ("ingest", self.settings.ingest_bearer_token),
        ):
            try:
                token = read()
            except OSError as error:
                log.error(
                    "token file unreadable; keeping the token in use",
                    extra={"token": name, "error": str(error)},
                )
                continue
            if token is None:
                log.error("token file empty; keeping the token in use", extra={"token": name})
            elif name == "admin" and self.admin_token is not None:
                self.admin_token = token
            elif name == "ingest" and self.intake is not None and self.intake.token is not None:
                self.intake.token = token

    def publishes_telemetry(self) -> bool:
        """Whether this instance publishes telemetry now: when it is enabled (with a broker),
        always without --ha-group, else while it leads its group."""
        leads = self.election is None or self.election.leader
        return self.settings.telemetry_enabled and leads

    def ready(self) -> tuple[bool, list[str]]:
        """Ready = connected to a broker (unless --brokers none), a matrix computed and, with
        --backfill-from, the backfill in one (or its bound expired); otherwise the reasons why
        not."""
        problems = []
        if self.start_failure is not None:
            problems.append(self.start_failure)
        if (since := self.warm_since) is not None and self.warm is not None:
            waited, deadline = time.monotonic() - since, self.warm.deadline
            problems.append(
                f"warm start in progress ({waited:.0f} s, at most --warm-deadline {deadline:g} s)"
            )
        if self.bus is not None and not self.bus.connected:
            problems.append("not connected to a broker")
        latest = self.cycle.latest
        if latest is None:
            problems.append("no cost matrix computed yet")
        backfill = self.backfill
        waiting = backfill and backfill.unready_reason(latest.generated_at if latest else None)
        if waiting:
            problems.append(waiting)
        return not problems, problems


#: The name of the part that takes --warm-from's state (started on a thread of its own).
WARM_START_PART = "warm start"


_S = TypeVar("_S")


def _source_of(sources: Sequence[Source], kind: type[_S]) -> _S | None:
    return next((source for source in sources if isinstance(source, kind)), None)


@dataclass(frozen=True)
class SourceNeeds:
    """What every source factory may build its source with."""

    entry: IngestEntry
    #: The subscribed topics and what each carries.
    topics: dict[str, MeasurementKind]
    #: Parses bodies in the parser processes (None: in the caller's thread).
    parser: Parser | None
    #: Frames are acknowledged once journaled (--state-dir), not on delivery.
    journaled: bool
    #: How broker connections reach the brokers (`broker_access`).
    brokers: BrokerAccess


def bus_source(settings: Settings, needs: SourceNeeds) -> StompSource | None:
    """The subscription to the bus's topics (None with --brokers none); with --state-dir frames
    are acknowledged once journaled, else on delivery."""
    if not settings.brokers:
        return None
    return StompSource(
        needs.brokers,
        list(needs.topics),
        needs.entry,
        subscription=SubscriptionSpec(
            mode=settings.subscription,
            client_id=settings.client_id,
            ack="client" if needs.journaled else "auto",
            prefetch=settings.prefetch,
            flavour=settings.broker_flavour,
        ),
    )


def pscheduler_intake(settings: Settings, needs: SourceNeeds) -> PschedulerIntake:
    """What /ingest/pscheduler takes runs in with (disabled while no ingest token is set)."""
    rate = ClientRateLimiter(settings.ingest_client_rate, settings.ingest_client_burst)
    limits = InputLimits()
    return PschedulerIntake(
        settings.ingest_bearer_token(),
        needs.entry,
        rate,
        limits.max_body_bytes,
        settings.ingest_queue_bytes,
        limits.max_buckets,
    )


def archive_backfill(settings: Settings, needs: SourceNeeds) -> ArchiveBackfill | None:
    """The backfill of --backfill-from at start (None without it)."""
    archive = backfill_settings(settings)
    return ArchiveBackfill(needs.entry, archive, parser=needs.parser) if archive else None


#: Every kind of input `nettel serve` has, in start order: a new one is a module implementing
#: `service.ingest.source.Source` and a factory here.
SOURCE_FACTORIES: tuple[Callable[[Settings, SourceNeeds], Source | None], ...] = (
    bus_source,
    pscheduler_intake,
    archive_backfill,
)


def build_runtime(settings: Settings, broker_connector: Connector | None = None) -> Runtime:
    """Every part of `nettel serve`, each built with what it works with; `broker_connector`
    makes the broker connections (None: STOMP to --brokers; tests give an in-memory broker's)."""
    lock = StateDirLock(settings.state_dir) if settings.state_dir else None
    store = SnapshotStore(settings.state_dir) if settings.state_dir else None
    loaded = read_topology(settings)
    admission = LinkAdmission(settings.max_links, settings.new_links_per_minute)
    state = restore_state(settings, store, loaded, admission)
    topics = topic_kinds(settings)
    log = logging.getLogger("nettel.ingest")
    count = settings.parse_processes
    parsers = ParserProcesses(count, log=log) if count else None
    resolve = CachedResolver().resolve if settings.resolve_dns else None
    parser = parsers.parse if parsers else None
    pipeline = IngestPipeline(state, topics, log=log, parser=parser, resolve=resolve)
    persistence = None
    if store is not None:
        persistence = Persistence(
            pipeline, store, Journal(store.directory), settings.snapshot_interval
        )
        with admission.replaying():
            persistence.replay_journal()
    apply = persistence.apply_parsed if persistence else pipeline.apply_parsed
    batcher = FrameBatcher(pipeline.parse_frames, apply)
    entry = IngestEntry(pipeline, batcher)
    brokers = broker_access(settings, broker_connector)
    needs = SourceNeeds(entry, topics, parser, journaled=store is not None, brokers=brokers)
    sources = tuple(
        source for factory in SOURCE_FACTORIES if (source := factory(settings, needs)) is not None
    )
    bus, backfill = _source_of(sources, StompSource), _source_of(sources, ArchiveBackfill)
    backlog = BacklogWatch(
        lambda: ingest_is_behind(
            batcher.queued(),
            bus.unread_bytes() if bus else 0,
            bus.arrival_lag_seconds() if bus else None,
        )
    )
    model = load_model_slot(settings)
    alarms = AlarmService.build(settings)
    behind = backlog if backfill is None else lambda: backlog() or backfill.running
    # `runtime` is bound below; these run only once it is (the election while running, the
    # telemetry when a matrix is published).
    election = build_election(settings, brokers, eligible=lambda: runtime.ready()[0])
    guard = HttpGuard(http_limits(settings))
    telemetry = telemetry_publisher(settings, brokers, lambda: runtime.publishes_telemetry())
    served = ServedMatrix()
    publishers = build_publishers(
        settings,
        served,
        lambda: state.index.topology,
        telemetry,
        guard,
        alarms=alarms.book if alarms else None,
    )
    top = settings.metrics_top_site_pairs
    matrix_metrics = MatrixMetrics(served, top, publishers.site_links)
    retirement = LinkRetirement(state, settings.retire_after) if settings.retire_after else None
    cycle = MatrixCycle(
        state,
        settings.interval,
        model.current if model else None,
        settings.freshness,
        behind=behind,
        empirical_filter=settings.empirical_filter,
        observers=cycle_observers(matrix_metrics, retirement, alarms, publishers),
        served=served,
    )
    warm = warm_source(settings, store)
    topology = topology_refresher(settings, state, loaded)
    parts = running_parts(
        publishers=publishers,
        lock=lock,
        topology=topology,
        parsers=parsers,
        bus=bus,
        warm=warm,
        persistence=persistence,
        alarms=alarms,
        cycle=cycle,
        batcher=batcher,
        sources=sources,
        election=election,
    )
    runtime = Runtime(
        settings,
        state,
        pipeline,
        cycle,
        batcher,
        entry,
        sources,
        publishers,
        guard,
        CollectorRegistry(),
        parts,
        model=model,
        persistence=persistence,
        parsers=parsers,
        topology=topology,
        election=election,
        warm=warm,
        state_dir_lock=lock,
        admission=admission,
        admin_token=settings.admin_bearer_token(),
        alarms=alarms.book if alarms else None,
    )
    register_metrics(runtime.registry, runtime, matrix_metrics)
    return runtime


def cycle_observers(
    metrics: MatrixMetrics,
    retirement: LinkRetirement | None,
    alarms: AlarmService | None,
    publishers: Publishers,
) -> CycleObservers:
    """Everything the matrix cycle calls, in one place: its duration to the metrics and to
    retirement (idle links go between cycles), the analysis to the alarms, each snapshot's
    views prepared (the costliest site pairs, ALTO's maps), then the publishers (streams and
    broker telemetry)."""
    return CycleObservers(
        recomputed=(metrics.observe_seconds, *([retirement.after_cycle] if retirement else [])),
        analysed=(alarms.after_cycle,) if alarms else (),
        prepare=(metrics.prepare, publishers.prepare),
        published=(publishers.publish,),
    )


def running_parts(
    *,
    publishers: Publishers,
    lock: StateDirLock | None,
    topology: TopologyRefresher | None,
    parsers: ParserProcesses | None,
    bus: StompSource | None,
    warm: WarmSource | None,
    persistence: Persistence | None,
    alarms: AlarmService | None,
    cycle: MatrixCycle,
    batcher: FrameBatcher,
    sources: Sequence[Source],
    election: BrokerElection | None,
) -> list[Component]:
    """What runs, in start order; stopped in reverse, which is the order that matters:

    election first (another replica takes over publishing), the sources (the backfill stops
    reading, the bus stops handing frames on, the intake takes no more runs), the batcher
    (applies what is queued), the cycle, the alarms (their state saved once the cycle stopped
    raising them), persistence (its final snapshot acknowledges what was applied, over the still
    open subscription), the subscription, parser processes, topology
    refresh, the --state-dir lock, and last the publishers (SSE streams ended, telemetry
    stopped). At start the bus subscribes before --warm-from takes the peer's state, and both
    before the batcher: frames published meanwhile wait, none is missed."""
    candidates: list[Component | None] = [
        publishers,
        None if lock is None else Hooks("state-dir lock", on_stop=lock.release),
        topology,
        None if parsers is None else Hooks("parser processes", on_stop=parsers.stop),
        None if bus is None else Hooks("subscription", bus.connect, bus.disconnect),
        None if warm is None else Hooks(WARM_START_PART),  # `Runtime.start` runs it on a thread
        persistence,
        alarms,
        cycle,
        batcher,
        *sources,
        election,
    ]
    return [part for part in candidates if part is not None]


def register_metrics(
    registry: CollectorRegistry, runtime: Runtime, matrix_metrics: MatrixMetrics
) -> None:
    """/metrics: each part's collector, registered beside the part (those it lacks are not)."""

    def started_at() -> float:
        return runtime.started_at

    registry.register(BuildCollector())
    registry.register(
        IngestCollector(runtime.pipeline, runtime.batcher, runtime.backfill, started_at)
    )
    registry.register(LinkStateCollector(runtime.state, runtime.settings.max_links))
    registry.register(
        WarmStartCollector(lambda: runtime.warm_outcome, lambda: runtime.warm_rejected_check)
    )
    if runtime.bus is not None:
        registry.register(BrokerCollector(runtime.bus))
    registry.register(ElectionCollector(runtime.election, runtime.publishes_telemetry))
    publishers = runtime.publishers
    matrix_metrics.register(registry)
    if runtime.persistence is not None:
        registry.register(PersistenceCollector(runtime.persistence, started_at))
    registry.register(BackfillCollector(runtime.backfill))
    if runtime.topology is not None:
        registry.register(TopologyCollector(runtime.topology))
    if runtime.model is not None:
        register_model_metrics(registry, runtime.model)
    registry.register(HttpCollector(runtime.http_guard))
    register_stream_gauge(registry, publishers.stream_counts())
    if (alarms := publishers.alarms) is not None:
        registry.register(AlarmCollector(alarms, lambda: runtime.state.index.topology.sites))


def telemetry_publisher(
    settings: Settings, brokers: BrokerAccess, publishes: Callable[[], bool]
) -> TelemetryPublisher | None:
    """The broker telemetry publisher (None unless telemetry is enabled); it sends while
    `publishes`."""
    if not settings.telemetry_enabled:
        return None
    return TelemetryPublisher(
        brokers,
        settings.telemetry_topic,
        min_interval=settings.interval,
        publishes=publishes,
    )


def build_election(
    settings: Settings, brokers: BrokerAccess, eligible: Callable[[], bool]
) -> BrokerElection | None:
    """This replica's part in its --ha-group's election of the telemetry publisher, if any;
    it takes part while `eligible` (ready)."""
    if settings.ha_group is None:
        return None
    return BrokerElection(
        brokers,
        settings.ha_group,
        replica=settings.client_id,
        timing=LeaseTiming(settings.ha_lease_interval, settings.ha_lease_timeout),
        flavour=settings.broker_flavour,
        eligible=eligible,
    )


def topic_kinds(settings: Settings) -> dict[str, MeasurementKind]:
    """The subscribed topics and what each carries (a topic setting left empty: none)."""
    topics = {
        settings.delay_topic: MeasurementKind.DELAY,
        settings.loss_topic: MeasurementKind.LOSS,
        settings.throughput_topic: MeasurementKind.THROUGHPUT,
        settings.retransmits_topic: MeasurementKind.RETRANSMITS,
        settings.trace_topic: MeasurementKind.TRACE,
    }
    return {topic: kind for topic, kind in topics.items() if topic}


def warm_source(settings: Settings, store: SnapshotStore | None) -> WarmSource | None:
    """Where --warm-from takes the state from (None without it), with our own snapshot (a
    shared directory's peer snapshots must be newer)."""
    if settings.warm_from is None:
        return None
    own = store.path if store is not None and store.path.exists() else None
    token, timeout = settings.warm_bearer_token(), settings.warm_timeout
    return WarmSource(
        settings.warm_from,
        token,
        timeout,
        own,
        max_links=settings.max_links,
        deadline=settings.warm_deadline,
    )


def restore_state(
    settings: Settings,
    store: SnapshotStore | None,
    loaded: LoadedTopology | None = None,
    admission: Admission | None = None,
) -> LinkState:
    """The state of `store`'s snapshot (empty without one), with sites from --topology (read
    here unless `loaded` is given), taking new links as `admission` decides."""
    loaded = loaded or read_topology(settings)
    topology = loaded.topology if loaded else Topology()
    state = LinkState(topology, admission=admission)
    restored = store.read(topology) if store else None
    if restored is not None:
        state.adopt(restored)
    return state


def read_topology(settings: Settings) -> LoadedTopology | None:
    """--topology as read now; None without one (ConfigError when it cannot be used)."""
    if settings.topology is None:
        return None
    return load_topology(settings.topology, settings.psconfig_site_key)


def topology_refresher(
    settings: Settings, state: LinkState, loaded: LoadedTopology | None
) -> TopologyRefresher | None:
    """What keeps --topology current (None without one); logs what was loaded at start."""
    if settings.topology is None or loaded is None:
        return None
    log_loaded(logging.getLogger("nettel.topology"), loaded, state)
    interval, key = settings.topology_refresh, settings.psconfig_site_key
    return TopologyRefresher(state, settings.topology, loaded, interval, key)


def backfill_settings(settings: Settings) -> BackfillSettings | None:
    """What --backfill-from and its companions ask of a backfill; None without it."""
    if settings.backfill_from is None:
        return None
    return BackfillSettings(
        url=settings.backfill_from,
        bound=settings.backfill_bound,
        timeout=settings.backfill_timeout,
        page_size=settings.backfill_page_size,
        concurrency=settings.backfill_concurrency,
        history=settings.backfill_history,
        parse_processes=settings.backfill_parse_processes,
    )


def broker_access(settings: Settings, connector: Connector | None = None) -> BrokerAccess:
    """How every broker connection of the service reaches the brokers (made by `connector`;
    None: STOMP over the network)."""
    return BrokerAccess(
        settings.brokers,
        user=settings.broker_user,
        passcode=settings.broker_passcode(),
        heartbeat_ms=settings.heartbeat_ms,
        heartbeat_tolerance=settings.heartbeat_tolerance,
        tls=broker_tls_files(settings),
        vhost=settings.broker_vhost,
        connector=connector,
    )


def broker_tls_files(settings: Settings) -> TlsFiles | None:
    """TLS files for broker connections, or None when --broker-tls is off."""
    if not settings.broker_tls:
        return None
    files = (settings.broker_ca_file, settings.broker_cert_file, settings.broker_key_file)
    return TlsFiles(*(None if path is None else str(path) for path in files))


def load_model_slot(settings: Settings) -> ModelSlot | None:
    """The configured model; ConfigError when an explicitly given bundle cannot be served."""
    path = settings.model_path()
    if path is None:
        return None
    try:
        return ModelSlot(path)
    except ModelBundleError as error:
        raise ConfigError(f"--model: {error}") from None
