"""Keeps the state's topology current: re-read every interval and on request, swapped atomically.

A refresh reads and parses the source, then maps every row's ends through the new topology
(memoised, so each distinct host and address is matched once) while ingest carries on, and only
then holds the state's lock to swap the site columns in. A refresh that fails keeps the old
mapping; it is logged and counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Protocol

from service.errors import ConfigError
from service.lifecycle import BackgroundLoop
from service.topology.layouts import PSCONFIG_SITE_KEY
from service.topology.loading import LoadedTopology, load_topology
from service.topology.topology import Topology

Loader = Callable[[str, str], LoadedTopology]


class MappedLinks(Protocol):
    """What a topology maps: the link state (`service.state.link_state.LinkState`)."""

    def __len__(self) -> int: ...

    @property
    def unmapped(self) -> int:
        """Links with an end in no site."""
        ...

    def swap_topology(self, topology: Topology) -> float:
        """Re-map every link to `topology`; the longest time (s) the state's lock was held."""
        ...


class TopologyRefresher:
    """Owns the served topology of `state`; `refresh()` re-reads it, `request()` asks the
    refresh thread to (SIGHUP), and the thread also does so every `interval` s (0: never)."""

    name = "topology-refresh"

    def __init__(
        self,
        state: MappedLinks,
        source: str,
        loaded: LoadedTopology,
        interval: float,
        site_key: str = PSCONFIG_SITE_KEY,
        load: Loader = load_topology,
        log: logging.Logger | None = None,
    ) -> None:
        self.current = loaded
        #: Refreshes by outcome: "ok", "failed".
        self.outcomes: Counter[str] = Counter()
        self.loaded_at = time.time()
        #: Longest single hold of the state's lock (s) while the last topology was swapped in.
        self.last_lock_seconds = 0.0
        self._state = state
        self._source = source
        self._site_key = site_key
        self._load = load
        self._log = log or logging.getLogger("nettel.topology")
        self._refreshing = threading.Lock()
        self._loop = BackgroundLoop(self.name, self.refresh, interval or None, wait_first=True)

    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._loop.stop(timeout)

    def request(self) -> None:
        """Refresh soon, on the refresh thread (never blocks: safe from a signal handler)."""
        self._loop.wake()

    def refresh(self) -> bool:
        """Re-read the source and swap it in; False (old mapping kept) when it cannot be used."""
        with self._refreshing:
            try:
                loaded = self._load(self._source, self._site_key)
            except ConfigError as error:
                self.outcomes["failed"] += 1
                self._log.error(
                    "topology refresh failed; keeping the old one", extra={"error": str(error)}
                )
                return False
            except Exception:  # a fault of nettel's; the refresh thread must live on
                self.outcomes["failed"] += 1
                self._log.exception("topology refresh failed; keeping the old one")
                return False
            self.last_lock_seconds = self._state.swap_topology(loaded.topology)
            self.current, self.loaded_at = loaded, time.time()
            self.outcomes["ok"] += 1
        log_loaded(self._log, loaded, self._state, self.last_lock_seconds)
        return True


def log_loaded(
    log: logging.Logger, loaded: LoadedTopology, state: MappedLinks, lock_seconds: float = 0.0
) -> None:
    """One line on what a topology holds and maps; one more naming what it left out."""
    topology = loaded.topology
    log.info(
        "topology loaded",
        extra={
            "source": loaded.where,
            "layout": "+".join(loaded.layouts),
            "sites": len(topology.sites),
            "hosts": len(topology.site_by_host),
            "networks": sum(map(len, topology.networks_by_site.values())),
            "links": len(state),
            "links_unmapped": state.unmapped,
            "lock_seconds": round(lock_seconds, 6),
        },
    )
    if topology.skipped:
        log.warning(
            "topology entries left out",
            extra={"count": len(topology.skipped), "first": list(topology.skipped[:10])},
        )
