"""Row numbers for directed links (source IP, destination IP), with host names and sites."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from service.parse.records import LinkEndpoints
from service.state.topology import Topology


@dataclass
class LinkIndex:
    """Assigns each new directed link the next row; rows are never reused or reordered."""

    topology: Topology = field(default_factory=Topology)
    rows: dict[tuple[str, str], int] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    destinations: list[str] = field(default_factory=list)
    source_hosts: list[str] = field(default_factory=list)
    destination_hosts: list[str] = field(default_factory=list)
    source_sites: list[str | None] = field(default_factory=list)
    destination_sites: list[str | None] = field(default_factory=list)
    ip_by_host: dict[str, str] = field(default_factory=dict)
    names_version: int = 0

    def __len__(self) -> int:
        return len(self.sources)

    def row_for(self, link: LinkEndpoints) -> int:
        """Row of `link`, added if new; later host names replace earlier ones."""
        key = (link.source, link.destination)
        row = self.rows.get(key)
        if row is None:
            row = self._append(link)
        elif self.source_hosts[row] != link.source_host or (
            self.destination_hosts[row] != link.destination_host
        ):
            self._set_hosts(row, link)
            self.names_version += 1
        return row

    def find_by_name(self, source: str, destination: str) -> int | None:
        """Row of the link between two endpoints, each given by IP or host name."""
        key = (self.ip_by_host.get(source, source), self.ip_by_host.get(destination, destination))
        return self.rows.get(key)

    def add_restored(
        self, source: str, destination: str, source_host: str, destination_host: str, row: int
    ) -> None:
        """Re-add a link from a snapshot; rows must come in order 0, 1, 2, ..."""
        if row != len(self.sources):
            raise ValueError(f"restored row {row} out of order")
        self._append(LinkEndpoints(source, destination, source_host, destination_host))

    def _append(self, link: LinkEndpoints) -> int:
        """New row; names are interned, so thousands of links share one string per host."""
        row = len(self.sources)
        source, destination = sys.intern(link.source), sys.intern(link.destination)
        self.rows[(source, destination)] = row
        self.sources.append(source)
        self.destinations.append(destination)
        self.source_hosts.append("")
        self.destination_hosts.append("")
        self.source_sites.append(None)
        self.destination_sites.append(None)
        self._set_hosts(row, link)
        return row

    def _set_hosts(self, row: int, link: LinkEndpoints) -> None:
        self.source_hosts[row] = sys.intern(link.source_host)
        self.destination_hosts[row] = sys.intern(link.destination_host)
        self.ip_by_host[link.source_host] = link.source
        self.ip_by_host[link.destination_host] = link.destination
        self.source_sites[row] = self.topology.site_of(link.source_host, link.source)
        self.destination_sites[row] = self.topology.site_of(link.destination_host, link.destination)
