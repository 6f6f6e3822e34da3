"""The alarm engine: evaluates each minute once, on the view the matrix cycle analysed.

A minute is evaluated once it has settled (`settle_seconds` after it ended, so that every
link's datapoints of it are in), in order, each exactly once (after a pause or a restart, the
minutes missed that the window still holds are caught up). Per minute, over all links at once:
the rules (`conditions`) give each link and host a verdict, the latches count them with
hysteresis, the minute's delay medians go into the baseline. Then, once per evaluation, the rules
on the links' throughput tests and traceroutes (`result_conditions`) judge the results the cycle
took with its view (each rule holds its own hysteresis: AAAS's 4-day bins, a path that
persists), their latches open at the first minute the rule holds and close at the first it does
not. Finally the latched links are grouped into alarms (`grouping`) and the book told what opened
and closed.

Its arrays have one row per link, the view's rows: rows appended to the state are appended
here; when the state's rows moved (retirement, a warm start, a renamed link: a new
`names_version`) they follow their links by (source, destination).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace

import numpy as np

from service.alarms import conditions as rules
from service.alarms import result_conditions as result_rules
from service.alarms.baseline import DelayBaseline
from service.alarms.book import AlarmBook
from service.alarms.grouping import (
    MINUTE_CONDITIONS,
    AlarmSpec,
    Grouping,
    LatchedHosts,
    LatchedLinks,
    LinkCondition,
)
from service.alarms.identities import LinkEnds
from service.alarms.latches import Latches
from service.alarms.records import Alarm, AlarmEvent, AlarmKind, alarm_id
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import LinkResults, StateView
from service.state.throughput_state import BandwidthChange

#: Minutes enter the delay baseline this long after they are evaluated, while the window still
#: holds them: the baseline never holds the minutes being judged against it, so a step in the
#: delay is judged against the delays before it (as AAAS's baseline ends where its window
#: starts).
BASELINE_LAG_MINUTES = WINDOW_MINUTES - 2
#: Links whose delay thresholds are refreshed per evaluated minute, at least (all of them in
#: meshes up to this size; in larger ones a tenth of the links, so each every ten minutes:
#: a baseline of days moves little in ten minutes).
REFRESH_ROWS = 4096
REFRESH_SHARE = 10
#: The conditions judged on the links' throughput tests and traceroutes.
RESULT_CONDITIONS = tuple(c for c in LinkCondition if c not in MINUTE_CONDITIONS)
#: The row array holding each link's established path (its fingerprint; 0: none yet).
ESTABLISHED_PATH = "path/established"
#: The row arrays holding the start of the test with which a bandwidth rule began to hold.
DECREASED_SINCE, INCREASED_SINCE = "bandwidth/decreased_since", "bandwidth/increased_since"
#: The row arrays of each link's recent tests (`result_conditions.RecentTests`): the latest
#: counted, then per slot its period, the sum of its rates and their number.
RECENT_TESTS = {
    "bandwidth/seen": (np.int64, ()),
    "bandwidth/period": (np.int32, (result_rules.RECENT_SLOTS,)),
    "bandwidth/total": (np.float32, (result_rules.RECENT_SLOTS,)),
    "bandwidth/count": (np.int16, (result_rules.RECENT_SLOTS,)),
}


@dataclass(frozen=True)
class AlarmRules:
    """The windows: open after a condition held this many measured minutes, close after this
    many clean ones; how long after its end a minute is evaluated."""

    open_minutes: int = 3
    delay_open_minutes: int = 5
    close_minutes: int = 5
    congestion_probability: float = 0.9
    congestion_minutes: int = 10
    settle_seconds: float = 30.0
    #: A new path, or one that stops before its destination, counts once its traces have shown
    #: it this long (perfSONAR traces every 10 minutes: three traces in a row).
    path_persist_minutes: int = 20
    #: A changed path becomes the link's established one after this long (its alarm closes).
    path_adopt_hours: int = 24

    def open_after(self, condition: LinkCondition | None) -> int:
        """Minutes a condition must hold (None: a host's clock)."""
        if condition is LinkCondition.CONGESTION:
            return self.congestion_minutes
        if condition in (LinkCondition.HIGH_DELAY, None):
            return self.delay_open_minutes
        return self.open_minutes


@dataclass(frozen=True)
class EngineState:
    """What the engine carries across a restart (copies): the baselines, the latches, the
    last minute evaluated, and each row's link and each clock latch's host."""

    last_minute: int | None
    epoch_minute: int
    sources: list[str]
    destinations: list[str]
    clock_hosts: list[str]
    weights: np.ndarray
    value_sum: np.ndarray
    log_jitter_sum: np.ndarray
    offset: np.ndarray
    latches: dict[LinkCondition, Latches]
    clock: Latches
    #: A profile's own arrays: per row (after the row's link) and per clock host.
    rows: dict[str, np.ndarray] = field(default_factory=dict)
    hosts: dict[str, np.ndarray] = field(default_factory=dict)


class AlarmEngine:
    """Raises and ends the alarms of `book` from the cycle's views (the short profile)."""

    def __init__(
        self, book: AlarmBook, rules_: AlarmRules | None = None, log: logging.Logger | None = None
    ) -> None:
        self.book = book
        self.rules = rules_ or AlarmRules()
        self.baseline = DelayBaseline()
        self.latches = {condition: Latches.empty(0) for condition in LinkCondition}
        self.clock = Latches.empty(0)
        #: Per link: the delay threshold, baseline mean and usual jitter (`rules.LinkNorms`).
        self.threshold = np.zeros(0, np.float32)
        self.mean = np.zeros(0, np.float32)
        self.jitter = np.zeros(0, np.float32)
        #: The last minute evaluated (None: none yet).
        self.last_minute: int | None = None
        self.ends = LinkEnds()
        #: (source, destination) of each row, and the names version they are of.
        self.keys: tuple[list[str], list[str]] = ([], [])
        self.names_version = -1
        self._clock_hosts: list[str] = []
        #: A profile's own arrays, per row and per host (of `_clock_hosts`), zero when new.
        self.row_arrays: dict[str, np.ndarray] = {
            name: np.zeros(0, np.int64)
            for name in (ESTABLISHED_PATH, DECREASED_SINCE, INCREASED_SINCE)
        } | {name: np.zeros((0, *width), dtype) for name, (dtype, width) in RECENT_TESTS.items()}
        self.host_arrays: dict[str, np.ndarray] = {}
        #: What a new row of a `row_arrays` array holds, where not 0.
        self.row_fill: dict[str, int] = {}
        self._latched: _Latched | None = None
        self._refresh_from = 0
        #: Refresh every link's norms at the next minute (after a restore).
        self._refresh_all = False
        self._lock = threading.RLock()
        self._log = log or logging.getLogger("nettel.alarms")

    @property
    def lock(self) -> threading.RLock:
        """Held while the engine evaluates; hold it to read its arrays consistently."""
        return self._lock

    def export(self) -> EngineState:
        """A copy of what a restart needs, taken at one moment."""
        with self._lock:
            baseline = self.baseline
            return EngineState(
                last_minute=self.last_minute,
                epoch_minute=baseline.epoch_minute,
                sources=list(self.keys[0]),
                destinations=list(self.keys[1]),
                clock_hosts=list(self._clock_hosts),
                weights=baseline.weights.copy(),
                value_sum=baseline.value_sum.copy(),
                log_jitter_sum=baseline.log_jitter_sum.copy(),
                offset=baseline.offset.copy(),
                latches={c: _copied(latches) for c, latches in self.latches.items()},
                clock=_copied(self.clock),
                rows={name: array.copy() for name, array in self.row_arrays.items()},
                hosts={name: array.copy() for name, array in self.host_arrays.items()},
            )

    def restore(self, state: EngineState) -> None:
        """Carry on from `state` (at start, before the first evaluation): its rows follow
        their links into the first view's rows."""
        with self._lock:
            n = len(state.sources)
            self.last_minute = state.last_minute
            self.baseline = DelayBaseline(0, state.epoch_minute)
            self.baseline.weights, self.baseline.value_sum = state.weights, state.value_sum
            self.baseline.log_jitter_sum, self.baseline.offset = state.log_jitter_sum, state.offset
            self.latches = {c: _copied(latches) for c, latches in state.latches.items()}
            self.clock = _copied(state.clock)
            self._clock_hosts = list(state.clock_hosts)
            self.row_arrays = {
                name: _saved_or_new(state.rows.get(name), own, n, self.row_fill.get(name, 0))
                for name, own in self.row_arrays.items()
            }
            hosts = len(state.clock_hosts)
            self.host_arrays = {
                name: _saved_or_new(state.hosts.get(name), own, hosts, 0)
                for name, own in self.host_arrays.items()
            }
            self.keys = (list(state.sources), list(state.destinations))
            self.names_version = -1  # the first view's rows are matched by link
            self.threshold, self.mean, self.jitter = (
                np.full(n, np.nan, np.float32) for _ in range(3)
            )
            self.ends = LinkEnds()
            self._refresh_all = True

    def evaluate(
        self, view: StateView, probability: np.ndarray, results: LinkResults | None = None
    ) -> list[AlarmEvent]:
        """Evaluate the settled minutes not evaluated yet, and the view's links' throughput and
        path `results` (taken with the view; None: those alarms stay as they are); the events
        to record (the caller records them, outside the engine's lock)."""
        with self._lock:
            now_minute = int(view.taken_at // 60)
            due = int((view.taken_at - self.rules.settle_seconds) // 60) - 1
            first = now_minute - (WINDOW_MINUTES - 1)  # the oldest minute the window still holds
            start = first if self.last_minute is None else max(first, self.last_minute + 1)
            if start > due:
                return []
            self._follow(view)
            folded = (
                first - 1 if self.last_minute is None else self.last_minute - BASELINE_LAG_MINUTES
            )
            for minute in range(start, due + 1):
                newest = np.where(view.latest_minute == minute, probability, np.nan)
                self._evaluate_minute(view, minute, newest)
                for old in range(max(folded + 1, first), minute - BASELINE_LAG_MINUTES + 1):
                    self._fold(view, old)
                folded = max(folded, minute - BASELINE_LAG_MINUTES)
                self._refresh_limits(minute)
            self._evaluate_results(view, results, due)
            self.last_minute = due
            open_alarms = {(a.kind, a.subject): a for a in self.book.open_alarms()}
            specs = self._specs(view, open_alarms)
            return [] if specs is None else reconcile(specs, open_alarms, view, view.taken_at)

    def _specs(
        self, view: StateView, open_alarms: dict[tuple[AlarmKind, str], Alarm]
    ) -> dict[tuple[AlarmKind, str], AlarmSpec] | None:
        """The alarms that should be open after the minutes just evaluated (None: no change)."""
        latched = self._latched
        if latched is None:
            return None
        grouping = Grouping(view, self.ends)
        return grouping.specs(latched.links, latched.clocks, open_alarms, latched.traced)

    # -- one minute ----------------------------------------------------------------------------

    def _evaluate_minute(self, view: StateView, minute: int, probability: np.ndarray) -> None:
        values = rules.minute_values(view, minute)
        norms = rules.LinkNorms(self.threshold, self.mean, self.jitter)
        queue = rules.queue_signs(values, norms, view)
        clock = rules.clock_corrections(values, self.ends)
        high, complete = rules.loss_verdicts(values, queue)
        explained = rules.clock_explained(self.ends, clock.verdict)
        measured = rules.ever_measured(view)
        verdicts = {
            LinkCondition.SILENT: rules.silent_verdict(values, self.ends, measured),
            LinkCondition.COMPLETE_LOSS: complete,
            LinkCondition.HIGH_LOSS: high,
            LinkCondition.HIGH_DELAY: rules.delay_verdict(values, norms, queue, explained),
            LinkCondition.CONGESTION: rules.congestion_verdict(
                probability, self.rules.congestion_probability, queue
            ),
        }
        close = self.rules.close_minutes
        for condition, verdict in verdicts.items():
            self.latches[condition].step(
                minute, verdict.condition, verdict.clean, self.rules.open_after(condition), close
            )
        self.clock.step(
            minute, clock.verdict.condition, clock.verdict.clean, self.rules.open_after(None), close
        )
        self._latched = _Latched(
            {c: self._latched_links(c, values, probability) for c in MINUTE_CONDITIONS},
            self._latched_clocks(clock),
        )

    # -- throughput tests and traceroutes ------------------------------------------------------

    def _evaluate_results(self, view: StateView, results: LinkResults | None, minute: int) -> None:
        """Step the result rules' latches at `minute` and add their latched links."""
        if self._latched is None:
            return
        if results is None:
            kept = {c: self._latched_results(c, None, None) for c in RESULT_CONDITIONS}
            self._latched = replace(self._latched, links=self._latched.links | kept)
            return
        if len(results.rows) != len(view):
            raise ValueError(f"results of {len(results.rows)} links for a view of {len(view)}")
        now, persist = view.taken_at, 60 * self.rules.path_persist_minutes
        paths, established = results.paths, self.row_arrays[ESTABLISHED_PATH]
        settled = result_rules.settled_paths(paths, established, now, persist)
        established[settled] = paths.fingerprint[settled]
        recent = result_rules.RecentTests(*(self.row_arrays[name] for name in RECENT_TESTS))
        recent.add(results.throughput)
        recent_mean, recent_tests = recent.mean(now)
        scores = result_rules.against_older_bins(results.bandwidth, recent_mean)
        decreased, increased = result_rules.bandwidth_verdicts(scores)
        tested = results.throughput.time
        decreased = result_rules.confirmed_by_next_test(
            decreased, self.row_arrays[DECREASED_SINCE], tested
        )
        increased = result_rules.confirmed_by_next_test(
            increased, self.row_arrays[INCREASED_SINCE], tested
        )
        verdicts = {
            LinkCondition.BANDWIDTH_DECREASED: decreased,
            LinkCondition.BANDWIDTH_INCREASED: increased,
            LinkCondition.PATH_CHANGED: result_rules.path_verdict(paths, established, now, persist),
            LinkCondition.UNREACHED: result_rules.unreached_verdict(paths, now, persist),
        }
        for condition, verdict in verdicts.items():
            self.latches[condition].step(minute, verdict.condition, verdict.clean, 1, 1)
        changed = self.latches[LinkCondition.PATH_CHANGED]
        adopted = changed.latched & (minute - changed.onset >= 60 * self.rules.path_adopt_hours)
        established[adopted] = paths.fingerprint[adopted]  # closes at the next evaluation
        bandwidth = _RecentScores(scores, recent_tests)
        links = {c: self._latched_results(c, results, bandwidth) for c in RESULT_CONDITIONS}
        changing, stopping = result_rules.pending_paths(paths, established, now, persist)
        for condition, young in (
            (LinkCondition.PATH_CHANGED, changing),
            (LinkCondition.UNREACHED, stopping),
        ):
            pending = np.flatnonzero(young & ~self.latches[condition].latched)
            links[condition] = replace(links[condition], pending=pending)
        traced = (paths.seen >= 0) & (paths.seen >= now - result_rules.PATH_STALE_S)
        self._latched = _Latched(self._latched.links | links, self._latched.clocks, traced)

    def _latched_results(
        self,
        condition: LinkCondition,
        results: LinkResults | None,
        bandwidth: _RecentScores | None,
    ) -> LatchedLinks:
        """A result rule's latched links with what their results (and, for the bandwidth rules,
        the scores of their recent tests) show; nothing without."""
        latches = self.latches[condition]
        rows = np.flatnonzero(latches.latched)
        onsets = latches.onset[rows]
        if results is None or bandwidth is None:
            return LatchedLinks(rows, onsets, [{} for _ in range(len(rows))])
        evidence: list[dict[str, float | int | str]] = []
        if condition in (LinkCondition.BANDWIDTH_DECREASED, LinkCondition.BANDWIDTH_INCREASED):
            scores = bandwidth.scores
            for row in rows.tolist():
                item = _numbers(change=scores.change[row], z=scores.z[row])
                item = {k: round(float(v), 4 if k == "change" else 2) for k, v in item.items()}
                if not np.isnan(scores.newest_mean[row]):
                    item["recent_mean_bps"] = round(float(scores.newest_mean[row]))
                item["recent_tests"] = int(bandwidth.tests[row])
                item |= {"bins": int(scores.bins[row])}
                item |= {"threshold_change": result_rules.BANDWIDTH_CHANGE}
                evidence.append(item | {"threshold_z": result_rules.BANDWIDTH_Z})
            return LatchedLinks(rows, onsets, evidence)
        paths = results.paths
        for row in rows.tolist():
            item = {"path_minutes": int(paths.seen[row] - paths.since[row]) // 60}
            if condition is LinkCondition.PATH_CHANGED:
                item = {"hops": int(paths.hop_count[row])} | item
                item["changes_last_day"] = int(paths.changes_last_day[row])
            evidence.append(item)
        # the alarm starts with the path's first trace, before it had persisted
        since = np.where(paths.since[rows] > 0, paths.since[rows] // 60, onsets)
        return LatchedLinks(rows, np.minimum(since, onsets), evidence)

    def _fold(self, view: StateView, minute: int) -> None:
        """Add `minute`'s delay medians and spreads to the baselines."""
        values = rules.minute_values(view, minute, delay_only=True)
        self.baseline.add(np.arange(len(view)), values.delay_median, values.delay_std, minute)

    def _refresh_limits(self, minute: int) -> None:
        """Recompute the delay threshold of the next block of links from their baselines."""
        n = len(self.threshold)
        count = min(n, max(REFRESH_ROWS, -(-n // REFRESH_SHARE)))
        if self._refresh_all:
            count, self._refresh_all = n, False
        if not count:
            return
        start = self._refresh_from % n
        rows = (
            (np.arange(start, start + count) % n)
            if start + count > n
            else slice(start, start + count)
        )
        stats = self.baseline.stats(minute, rows)
        norms = rules.link_norms(
            stats.p25, stats.p75, stats.p95, stats.mean, stats.jitter, stats.minutes
        )
        self.threshold[rows], self.mean[rows] = norms.threshold, norms.mean
        self.jitter[rows] = norms.jitter
        self._refresh_from = (start + count) % n

    def _latched_links(
        self, condition: LinkCondition, values: rules.MinuteValues, probability: np.ndarray
    ) -> LatchedLinks:
        latches = self.latches[condition]
        rows = np.flatnonzero(latches.latched)
        held = latches.held[rows].tolist()
        evidence: list[dict[str, float | int | str]] = []
        if condition is LinkCondition.HIGH_DELAY and len(rows):
            stats = self.baseline.stats(values.minute, rows)
        for at, row in enumerate(rows.tolist()):
            item: dict[str, float | int | str] = {"minutes": held[at]}
            if condition is LinkCondition.SILENT:
                item = {"silent_minutes": held[at]}
            elif condition in (LinkCondition.COMPLETE_LOSS, LinkCondition.HIGH_LOSS):
                item |= _numbers(loss=values.loss[row])
                item["threshold"] = (
                    rules.COMPLETE_LOSS
                    if condition is LinkCondition.COMPLETE_LOSS
                    else rules.HIGH_LOSS
                )
            elif condition is LinkCondition.HIGH_DELAY:
                item |= _numbers(
                    delay_ms=values.delay_median[row],
                    threshold_ms=self.threshold[row],
                    baseline_p95_ms=stats.p95[at],
                    baseline_mean_ms=stats.mean[at],
                    baseline_iqr_ms=stats.iqr[at],
                )
            else:
                item |= _numbers(congestion_probability=probability[row])
                item["threshold"] = self.rules.congestion_probability
            evidence.append(item)
        return LatchedLinks(rows, self.latches[condition].onset[rows], evidence)

    def _latched_clocks(self, clock: rules.ClockCorrections) -> LatchedHosts:
        codes = np.flatnonzero(self.clock.latched)
        evidence: list[dict[str, float | int | str]] = []
        for code in codes.tolist():
            item: dict[str, float | int | str] = _numbers(correction_ms=clock.correction[code])
            item["threshold_ms"] = rules.CLOCK_CORRECTION_MS
            item["negative_delay_links"] = int(clock.negative_links[code])
            item["minutes"] = int(self.clock.held[code])
            evidence.append(item)
        return LatchedHosts(codes, self.clock.onset[codes], evidence)

    # -- rows ----------------------------------------------------------------------------------

    def _follow(self, view: StateView) -> None:
        """Make the arrays' rows the view's: append new links, or follow moved ones by key."""
        n, had = len(view), len(self.threshold)
        if view.names_version == self.names_version and n >= had:
            if n == had:
                return
            old = np.arange(had)
        else:
            position = {key: row for row, key in enumerate(zip(*self.keys, strict=True))}
            keys = zip(view.sources, view.destinations, strict=True)
            old = np.fromiter((position.get(key, -1) for key in keys), np.int64, n)
        self.baseline.take(old, n)
        for latches in self.latches.values():
            latches.take(old, n)
        self.row_arrays = {
            name: _taken(array, old, n, self.row_fill.get(name, 0))
            for name, array in self.row_arrays.items()
        }
        self.threshold = _taken(self.threshold, old, n)
        self.mean = _taken(self.mean, old, n)
        self.jitter = _taken(self.jitter, old, n)
        self.keys = (view.sources, view.destinations)
        self.names_version = view.names_version
        self.ends.follow(view)
        if self.ends.hosts != self._clock_hosts:
            code_of = {name: code for code, name in enumerate(self._clock_hosts)}
            hosts = self.ends.hosts
            old_hosts = np.fromiter((code_of.get(h, -1) for h in hosts), np.int64, len(hosts))
            self.clock.take(old_hosts, len(hosts))
            self.host_arrays = {
                name: _taken(array, old_hosts, len(hosts), 0)
                for name, array in self.host_arrays.items()
            }
            self._clock_hosts = list(hosts)


@dataclass(frozen=True)
class _RecentScores:
    """AAAS's scores of each link's recent tests against its older bins, and their number."""

    scores: BandwidthChange
    tests: np.ndarray


@dataclass(frozen=True)
class _Latched:
    links: dict[LinkCondition, LatchedLinks]
    clocks: LatchedHosts
    #: Links with a recent trace (None: no results seen yet).
    traced: np.ndarray | None = None


def reconcile(
    specs: dict[tuple[AlarmKind, str], AlarmSpec],
    open_alarms: dict[tuple[AlarmKind, str], Alarm],
    view: StateView,
    now: float,
) -> list[AlarmEvent]:
    """Close the open alarms no spec asks for, then open those the specs ask for anew."""
    events = [
        AlarmEvent("close", alarm.closed(now), now)
        for key, alarm in open_alarms.items()
        if key not in specs
    ]
    for key, spec in specs.items():
        if key in open_alarms:
            continue
        links = tuple((view.sources[row], view.destinations[row]) for row in spec.rows)
        alarm = Alarm(
            id=alarm_id(spec.kind, spec.subject, now),
            kind=spec.kind,
            subject=spec.subject,
            sites=spec.sites,
            hosts=spec.hosts,
            links=links,
            started_at=float(spec.onset_minute * 60),
            opened_at=now,
            ended_at=None,
            evidence=spec.evidence,
        )
        events.append(AlarmEvent("open", alarm, now))
    return events


def _copied(latches: Latches) -> Latches:
    return Latches(
        latches.held.copy(), latches.clean.copy(), latches.latched.copy(), latches.onset.copy()
    )


def _numbers(**values: float | np.floating) -> dict[str, float | int | str]:
    """Evidence values rounded for reading (NaN left out)."""
    return {key: round(float(v), 4) for key, v in values.items() if not np.isnan(v)}


def _saved_or_new(saved: np.ndarray | None, own: np.ndarray, size: int, fill: int) -> np.ndarray:
    """A profile's saved array, or a new one when the state saved has none like it (another
    profile's)."""
    if saved is not None and saved.dtype == own.dtype and saved.shape[1:] == own.shape[1:]:
        return saved.copy()
    return np.full((size, *own.shape[1:]), fill, own.dtype)


def _taken(array: np.ndarray, old: np.ndarray, n: int, fill: float = np.nan) -> np.ndarray:
    """Entry i is `array[old[i]]`, or `fill` where `old[i]` is -1 (over the first axis)."""
    result = np.full((n, *array.shape[1:]), fill, array.dtype)
    kept = old >= 0
    result[kept] = array[old[kept]]
    return result
