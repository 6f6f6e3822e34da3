"""Which host and site each link's ends are, as integer codes over the view's rows.

The rules count per host and per site with `np.bincount` over these codes. Working them out
visits every link once, so they are kept between views: rows appended since (new links) are
coded alone; a view whose names changed (`StateView.names_version`: retirement, a warm start, a
topology refresh, a renamed host) is coded afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from service.state.link_state import StateView


@dataclass
class LinkEnds:
    """Host codes of every row's ends, each host's name and site, and each site's hosts."""

    source_host: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    destination_host: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    #: Host code -> name (a host without a name is named by its address).
    hosts: list[str] = field(default_factory=list)
    #: Host code -> the site its links place it at (None: no site).
    host_site: list[str | None] = field(default_factory=list)
    #: The views these codes are of: names version and row count.
    names_version: int = -1
    rows: int = 0
    _codes: dict[str, int] = field(default_factory=dict)

    @property
    def host_count(self) -> int:
        return len(self.hosts)

    def follow(self, view: StateView) -> None:
        """Code `view`'s rows: only the new ones when its names are those already coded."""
        if view.names_version != self.names_version or len(view) < self.rows:
            self._reset()
        start = self.rows
        block = slice(start, len(view))
        sources = self._code(
            view.source_hosts[block], view.sources[block], view.source_sites[block]
        )
        destinations = self._code(
            view.destination_hosts[block], view.destinations[block], view.destination_sites[block]
        )
        self.source_host = np.concatenate([self.source_host[:start], sources])
        self.destination_host = np.concatenate([self.destination_host[:start], destinations])
        self.names_version, self.rows = view.names_version, len(view)

    def site_hosts(self) -> dict[str, set[int]]:
        """Site -> the codes of its hosts."""
        hosts: dict[str, set[int]] = {}
        for code, site in enumerate(self.host_site):
            if site is not None:
                hosts.setdefault(site, set()).add(code)
        return hosts

    def _reset(self) -> None:
        self.source_host = np.zeros(0, np.int32)
        self.destination_host = np.zeros(0, np.int32)
        self.hosts, self.host_site, self._codes = [], [], {}
        self.rows = 0

    def _code(self, names: list[str], addresses: list[str], sites: list[str | None]) -> np.ndarray:
        codes = np.empty(len(names), np.int32)
        known = self._codes
        for position, (name, address, site) in enumerate(zip(names, addresses, sites, strict=True)):
            host = name or address
            code = known.get(host)
            if code is None:
                code = known[host] = len(self.hosts)
                self.hosts.append(host)
                self.host_site.append(site)
            codes[position] = code
        return codes
