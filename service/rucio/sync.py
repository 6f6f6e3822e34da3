"""`nettel rucio-sync`'s work: one sync, the loop around it, the state file and the metrics.

A sync reads nettel's site-level costs (`GET /costmatrix?level=site`) and Rucio's RSEs with their
site attribute, plans which pairs to visit (`service.rucio.distances`), reads those pairs'
distances, saves the state with the writes about to be sent (so a crash never loses a
baseline), sends the writes and saves the state again. Reads and writes run on a small thread
pool; a failing pair is counted and the others go on. nettel unreachable or without a matrix
means no data: every managed pair goes back to its baseline.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client import Counter as MetricCounter

from service.errors import ConfigError
from service.rucio.client import RucioDistances, RucioRequestError
from service.rucio.distances import (
    Decision,
    Pair,
    PenaltyPolicy,
    SyncState,
    Visit,
    confirmed,
    decide,
    decode_state,
    encode_state,
    plan_visits,
    reread_slice,
    rse_pairs,
    site_costs,
    with_pending,
)

STATE_FILE = "rucio-sync.json"
NETTEL_ATTEMPTS = 3
NETTEL_BACKOFF_SECONDS = 1.0
#: After a failed sync the loop tries again after 10 s, 20 s, ... (at most --interval).
RETRY_FIRST_SECONDS = 10.0
#: Each sync reads again the managed pairs of one slice in this many (a rotation), so a distance
#: changed behind rucio-sync's back is repaired within this many syncs.
REREAD_SYNCS = 10
#: Pairs whose distance should change that one sync visits at most (a read and a write each).
MAX_CHANGES = 2000

log = logging.getLogger("nettel.rucio_sync")


@dataclass(frozen=True)
class SyncOptions:
    """What a sync is told (`nettel rucio-sync` flags)."""

    nettel_url: str
    site_attribute: str = "site"
    rse_expression: str | None = None
    policy: PenaltyPolicy = PenaltyPolicy()
    baselines: Mapping[Pair, int] = field(default_factory=dict)
    add_missing: bool = False
    added_baseline: int = 10
    concurrency: int = 4
    dry_run: bool = False
    nettel_timeout: float = 30.0
    #: Every managed pair is read again once in this many syncs (drift repair).
    reread_syncs: int = REREAD_SYNCS
    #: At most this many pairs whose distance should change are visited per sync (largest
    #: changes first; the others at the next sync), so that a sync stays within a minute.
    max_changes: int = MAX_CHANGES


@dataclass
class SyncReport:
    """The counts of one sync (the log line's fields)."""

    rses: int = 0
    pairs: int = 0
    site_pairs_with_data: int = 0
    nettel_ok: bool = True
    visited: int = 0
    written: int = 0
    added: int = 0
    adopted: int = 0
    no_row: int = 0
    penalised: int = 0
    reread: int = 0
    drifted: int = 0
    deferred: int = 0
    errors: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.nettel_ok and self.errors == 0

    def fields(self) -> dict[str, object]:
        return asdict(self) | {"seconds": round(self.seconds, 3)}


class SyncFailed(RuntimeError):
    """No sync could be made (Rucio's RSEs could not be listed, the state could not be saved)."""


class SyncMetrics:
    """What an operator scrapes: last success, pairs changed, errors, requests."""

    def __init__(self, registry: CollectorRegistry) -> None:
        prefix = "nettel_rucio_sync"
        self.last_success = Gauge(
            f"{prefix}_last_success_timestamp_seconds",
            "when the last sync without errors ended (Unix time)",
            registry=registry,
        )
        self.duration = Gauge(
            f"{prefix}_duration_seconds", "wall time of the last sync", registry=registry
        )
        self.syncs = MetricCounter(
            f"{prefix}_syncs", "syncs by outcome: ok, errors (some pairs), failed", ["outcome"],
            registry=registry,
        )  # fmt: skip
        self.changed = MetricCounter(
            f"{prefix}_pairs_changed", "distances written to Rucio", registry=registry
        )
        self.errors = MetricCounter(
            f"{prefix}_errors",
            "failures by stage: nettel, rucio_list, rucio_read, rucio_write, state",
            ["stage"],
            registry=registry,
        )
        self.requests = MetricCounter(
            f"{prefix}_rucio_requests", "requests sent to Rucio by operation", ["operation"],
            registry=registry,
        )  # fmt: skip
        self.pairs = Gauge(
            f"{prefix}_pairs",
            "RSE pairs after the last sync: managed (distance known), penalised (above baseline)",
            ["state"],
            registry=registry,
        )
        for stage in ("nettel", "rucio_list", "rucio_read", "rucio_write", "state"):
            self.errors.labels(stage)
        for outcome in ("ok", "errors", "failed"):
            self.syncs.labels(outcome)
        for operation in RucioDistances.OPERATIONS:
            self.requests.labels(operation)
        for state in ("managed", "penalised"):
            self.pairs.labels(state)


class StateFile:
    """The state file in `--state-dir`, written whole and atomically."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / STATE_FILE

    def load(self, rucio_url: str) -> SyncState:
        """The saved state (empty if none); ConfigError if it is unreadable or another Rucio's."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return SyncState(rucio_url)
        except OSError as error:
            raise ConfigError(f"{self.path}: cannot read: {error}") from None
        try:
            state = decode_state(text)
        except ValueError as error:
            raise ConfigError(f"{self.path}: {error}") from None
        if state.rucio_url != rucio_url:
            raise ConfigError(
                f"{self.path} holds the baselines of Rucio {state.rucio_url}, not {rucio_url}: "
                "use a --state-dir of its own for each Rucio"
            )
        return state

    def save(self, state: SyncState) -> None:
        temporary = self.path.with_suffix(".tmp")
        with temporary.open("w") as handle:
            handle.write(encode_state(state))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


def fetch_site_links(url: str, timeout: float) -> list[dict[str, Any]] | None:
    """nettel's site-level links (`/costmatrix?level=site`), retried; None when there are none
    to be had (unreachable, an error status, no matrix yet)."""
    endpoint = f"{url.rstrip('/')}/costmatrix"
    for attempt in range(NETTEL_ATTEMPTS):
        try:
            response = httpx.get(endpoint, params={"level": "site"}, timeout=timeout)
            response.raise_for_status()
            links: list[dict[str, Any]] = response.json()["links"]
            return links
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
            if attempt == NETTEL_ATTEMPTS - 1:
                log.warning(
                    "nettel: no costs from %s after %d tries (%s): every pair at its baseline",
                    endpoint, NETTEL_ATTEMPTS, error,
                )  # fmt: skip
            else:
                time.sleep(NETTEL_BACKOFF_SECONDS * 2**attempt)
    return None


def log_once_per_sync(message: str, examples: list[tuple[Pair, object]]) -> None:
    """One warning for all the pairs of a sync that share `message`, with the first of them."""
    if examples:
        (source, destination), detail = examples[0]
        log.warning(
            "rucio: %d %s, first %s -> %s: %s",
            len(examples), message, source, destination, detail,
        )  # fmt: skip


class RucioSync:
    """Syncs nettel's costs into one Rucio's distances, keeping the state in `state_file`."""

    def __init__(
        self,
        options: SyncOptions,
        rucio: RucioDistances,
        state_file: StateFile,
        metrics: SyncMetrics,
    ) -> None:
        self.options = options
        self.rucio = rucio
        self.state_file = state_file
        self.state = state_file.load(rucio.host)
        self.metrics = metrics
        self._pool = ThreadPoolExecutor(options.concurrency, thread_name_prefix="rucio")

    def close(self) -> None:
        self._pool.shutdown()

    def run_once(self) -> SyncReport:
        """One sync; SyncFailed when nothing could be synced."""
        started = time.monotonic()
        before = Counter(self.rucio.requests)
        report = SyncReport()
        try:
            self._sync(report)
        except SyncFailed:
            self.metrics.syncs.labels("failed").inc()
            raise
        finally:
            report.requests = dict(sorted((Counter(self.rucio.requests) - before).items()))
            for operation, count in report.requests.items():
                self.metrics.requests.labels(operation).inc(count)
            report.seconds = time.monotonic() - started
            self.metrics.duration.set(report.seconds)
        self.metrics.syncs.labels("ok" if report.ok else "errors").inc()
        if report.ok:
            self.metrics.last_success.set(time.time())
        log.info("rucio sync", extra=report.fields())
        return report

    def _sync(self, report: SyncReport) -> None:
        options = self.options
        links = fetch_site_links(options.nettel_url, options.nettel_timeout)
        if links is None:
            report.nettel_ok = False
            self.metrics.errors.labels("nettel").inc()
        costs = site_costs(links or [])
        try:
            rse_sites = self.rucio.rse_sites(
                options.site_attribute, options.rse_expression, self._pool.map
            )
        except RucioRequestError as error:
            self.metrics.errors.labels("rucio_list").inc()
            raise SyncFailed(f"cannot list Rucio's RSEs: {error}") from None
        pairs = rse_pairs(rse_sites)
        report.rses, report.pairs, report.site_pairs_with_data = (
            len(rse_sites), len(pairs), len(costs)
        )  # fmt: skip
        now = time.time()
        managed = self.state.pairs.keys()
        reread = reread_slice(managed, self.state.syncs, options.reread_syncs)
        self.state.syncs += 1
        changes = len(self._plan(pairs, rse_sites, costs, now, set(), None))
        report.deferred = max(0, changes - options.max_changes)
        visits = self._plan(pairs, rse_sites, costs, now, reread, options.max_changes)
        report.reread = sum(visit.pair in reread for visit in visits)
        report.visited = len(visits)
        decisions = self._read(visits, report, now)
        writes = [(pair, decision) for pair, decision in decisions if decision.write is not None]
        if options.dry_run:
            self._print_plan(writes)
        elif writes:
            self._write(writes, report)
        elif visits or self.state.pairs:
            self._save()  # what was read (baselines, rows found missing), the rotation's turn
        report.penalised = sum(r.distance > r.baseline for r in self.state.pairs.values())
        self.metrics.pairs.labels("managed").set(len(self.state.pairs))
        self.metrics.pairs.labels("penalised").set(report.penalised)

    def _plan(
        self,
        pairs: list[Pair],
        rse_sites: Mapping[str, str],
        costs: Mapping[tuple[str, str], float],
        now: float,
        reread: set[Pair],
        max_changes: int | None,
    ) -> list[Visit]:
        return plan_visits(
            pairs,
            rse_sites,
            costs,
            self.state,
            self.options.policy,
            baselines=self.options.baselines,
            add_missing=self.options.add_missing,
            now=now,
            reread=reread,
            max_changes=max_changes,
        )

    def _read(
        self, visits: list[Visit], report: SyncReport, now: float
    ) -> list[tuple[Pair, Decision]]:
        """Each visited pair's Rucio value and what it needs; the state takes what was read."""

        def read(visit: Visit) -> tuple[Visit, int | None | RucioRequestError]:
            try:
                return visit, self.rucio.distance(*visit.pair)
            except RucioRequestError as error:
                return visit, error

        decisions = []
        failed: list[tuple[Pair, object]] = []
        adopted: list[tuple[Pair, object]] = []
        drifted: list[tuple[Pair, object]] = []
        for visit, observed in self._pool.map(read, visits):
            if isinstance(observed, RucioRequestError):
                report.errors += 1
                self.metrics.errors.labels("rucio_read").inc()
                failed.append((visit.pair, observed))
                continue
            decision = decide(
                visit,
                self.state.pairs.get(visit.pair),
                observed,
                policy=self.options.policy,
                given_baseline=self.options.baselines.get(visit.pair),
                add_missing=self.options.add_missing,
                added_baseline=self.options.added_baseline,
            )
            if decision.record is None:
                report.no_row += 1
                self.state.missing[visit.pair] = now
                self.state.pairs.pop(visit.pair, None)
                continue
            if decision.adopted:
                report.adopted += 1
                adopted.append((visit.pair, f"now {decision.record.baseline}"))
            if decision.drifted:
                report.drifted += 1
                drifted.append(
                    (visit.pair, f"{observed}, not {self.state.pairs[visit.pair].distance}")
                )
            self.state.missing.pop(visit.pair, None)
            self.state.pairs[visit.pair] = decision.record
            decisions.append((visit.pair, decision))
        log_once_per_sync("distance read(s) failed", failed)
        log_once_per_sync("distance(s) set outside rucio-sync became their baseline", adopted)
        log_once_per_sync(
            "distance(s) held an earlier value of rucio-sync's own (a restored database, a "
            "reset): corrected", drifted
        )  # fmt: skip
        return decisions

    def _write(self, writes: list[tuple[Pair, Decision]], report: SyncReport) -> None:
        """Save the state with the writes pending, send them, save the confirmed state."""
        for pair, decision in writes:
            assert decision.record is not None and decision.write is not None
            self.state.pairs[pair] = with_pending(decision.record, decision.write)
        self._save()

        def write(item: tuple[Pair, Decision]) -> tuple[Pair, Decision, RucioRequestError | None]:
            pair, decision = item
            assert decision.write is not None
            send = self.rucio.add if decision.add else self.rucio.update
            try:
                send(*pair, decision.write)
            except RucioRequestError as error:
                return pair, decision, error
            return pair, decision, None

        failed: list[tuple[Pair, object]] = []
        for pair, decision, error in self._pool.map(write, writes):
            assert decision.record is not None and decision.write is not None
            if error is not None:
                report.errors += 1
                self.metrics.errors.labels("rucio_write").inc()
                failed.append((pair, error))
                continue
            self.state.pairs[pair] = confirmed(decision.record, decision.write)
            report.written += 1
            report.added += decision.add
            self.metrics.changed.inc()
        log_once_per_sync("distance write(s) failed", failed)
        self._save()

    def _save(self) -> None:
        try:
            self.state_file.save(self.state)
        except OSError as error:
            self.metrics.errors.labels("state").inc()
            raise SyncFailed(f"cannot save {self.state_file.path}: {error}") from None

    def _print_plan(self, writes: list[tuple[Pair, Decision]]) -> None:
        for (source, destination), decision in writes:
            assert decision.record is not None
            verb = "add" if decision.add else "set"
            was = "no row" if decision.add else str(decision.record.distance)
            sys.stdout.write(
                f"would {verb} {source} -> {destination}: {was} -> {decision.write} "
                f"(baseline {decision.record.baseline})\n"
            )
        sys.stdout.write(f"{len(writes)} distance(s) would change\n")


def retry_delay(interval: float, failures: int) -> float:
    """Seconds until the next sync: `interval`, or sooner after failures (10 s, doubling).

    >>> [retry_delay(300.0, n) for n in range(7)]
    [300.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0]
    """
    if failures == 0:
        return interval
    return min(interval, RETRY_FIRST_SECONDS * 2.0 ** (failures - 1))


def run_loop(sync: Callable[[], SyncReport], interval: float, stop: threading.Event) -> None:
    """Sync every `interval` seconds until `stop`; a failed sync is tried again sooner."""
    failures = 0
    while not stop.is_set():
        try:
            report = sync()
            failures = 0 if report.ok else failures + 1
        except SyncFailed as error:
            log.error("rucio sync failed: %s", error)
            failures += 1
        stop.wait(retry_delay(interval, failures))
