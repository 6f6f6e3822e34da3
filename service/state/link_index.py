"""Row numbers for directed links, with host names and sites.

A row is keyed by its ends' identities, their IPs where known. Bus messages carry both ends' IPs
and the host names the toolkit used, so the index learns each host's address (per IP version).
pScheduler runs name the ends as their task does, mostly by host name (`NamedEndpoints`): a
name resolves to the address the bus revealed for it (of the run's IP version), else to the
address the topology's inventory pairs with it (pSConfig), else to the address the run carries
(an IP literal, or DNS when enabled); an end still unresolved is keyed
by its lower-cased host name, prefixed `ipv4:`/`ipv6:` when the run fixes the IP version (so a
dual-stack mesh's two links stay apart). When such an end resolves later (the bus reports the
link, or a run comes after the bus revealed the host), its row is re-keyed: the same directed
link keeps one row whichever source reported it first. Rows keep their order; only retirement
(`keep_rows`) removes rows, moving the later ones up, and new links take the rows after them.

Each row's ends have sites from the topology; a new topology re-maps every row (`set_topology`).

Host names are claims of whoever publishes, so a name, once bound to an address, stays bound: by
the topology's inventory (pSConfig, which wins), else by the first bus message that paired them.
A message pairing a bound name with another address, or giving a row that has a name another
one, changes nothing (the row is labelled by its address, or keeps its name); the conflict is
listed for the caller to count and log (`take_conflicts`). Retirement unbinds the names of the
addresses it forgets.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from service.parse.addresses import canonical_ip
from service.parse.records import LinkEndpoints, NamedEndpoints
from service.topology.topology import Topology, host_key

Key = tuple[str, str]
#: The per-row lists of `LinkIndex`.
_ROW_COLUMNS = (
    "sources",
    "destinations",
    "source_hosts",
    "destination_hosts",
    "source_sites",
    "destination_sites",
)
#: (host name, IP or identity) -> site, e.g. `Topology.site_of`.
SiteOf = Callable[[str, str], str | None]


@dataclass
class LinkIndex:
    """Assigns each new directed link the next row; retired rows close up (`keep_rows`)."""

    topology: Topology = field(default_factory=Topology)
    rows: dict[Key, int] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    destinations: list[str] = field(default_factory=list)
    source_hosts: list[str] = field(default_factory=list)
    destination_hosts: list[str] = field(default_factory=list)
    source_sites: list[str | None] = field(default_factory=list)
    destination_sites: list[str | None] = field(default_factory=list)
    #: Host name (`host_key`) -> the address the bus first reported for it, of either version.
    ip_by_host: dict[str, str] = field(default_factory=dict)
    #: (host name, 4 or 6) -> the address of that IP version the bus first reported for it.
    ip_by_host_version: dict[tuple[str, int], str] = field(default_factory=dict)
    names_version: int = 0
    #: Rows with an end that no site matches.
    unmapped: int = 0
    #: Host-name claims refused since `take_conflicts` was last called, described.
    conflicts: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sources)

    def ends(self) -> tuple[list[str], list[str], list[str], list[str]]:
        """Copies of the source hosts, sources, destination hosts and destinations."""
        return (
            list(self.source_hosts),
            list(self.sources),
            list(self.destination_hosts),
            list(self.destinations),
        )

    def set_topology(self, topology: Topology, site_of: SiteOf | None = None) -> None:
        """Re-map every row's sites to `topology`, whose `site_of` a caller may have memoised
        (and warmed over `ends()`) so that this takes little time; new site columns replace the
        old, and `names_version` moves on so every record is rebuilt."""
        site_of = site_of or topology.site_of
        sources = [site_of(h, ip) for h, ip in zip(self.source_hosts, self.sources, strict=True)]
        destinations = [
            site_of(h, ip) for h, ip in zip(self.destination_hosts, self.destinations, strict=True)
        ]
        self.topology = topology
        self.source_sites, self.destination_sites = sources, destinations
        pairs = zip(sources, destinations, strict=True)
        self.unmapped = sum(source is None or destination is None for source, destination in pairs)
        self.names_version += 1

    def row_for(
        self, link: LinkEndpoints | NamedEndpoints, admit: Callable[[], bool] | None = None
    ) -> int | None:
        """Row of `link`, added if new and `admit()` agrees (None when it does not). A bus link
        names its row's hosts unless they are bound otherwise (see the module); a named link
        (pScheduler) changes no row's names, only, once resolved, the key of a row it created."""
        if isinstance(link, NamedEndpoints):
            return self._row_for_named(link, admit)
        key = (link.source, link.destination)
        row = self.rows.get(key)
        if row is None:
            source_host = self._claimed(link.source_host, link.source)
            destination_host = self._claimed(link.destination_host, link.destination)
            row = self._adopt(key, _bus_name_keys(link))
            if row is not None:
                self._set_hosts(row, source_host, destination_host, learn=True)
            elif admit is None or admit():
                row = self._append(key, source_host, destination_host, learn=True)
        elif self.source_hosts[row] != link.source_host or (
            self.destination_hosts[row] != link.destination_host
        ):
            self._rename(row, link)
        return row

    def take_conflicts(self) -> list[str]:
        """The host-name claims refused since the last call (and forget them)."""
        conflicts, self.conflicts = self.conflicts, []
        return conflicts

    def keep_rows(self, keep: list[int]) -> None:
        """Keep only rows `keep` (ascending), renumbered 0, 1, ... in their order; host
        addresses that no kept row has any more are forgotten (a returning host is learnt anew)."""
        for name in _ROW_COLUMNS:
            values = getattr(self, name)
            setattr(self, name, [values[row] for row in keep])
        keys = zip(self.sources, self.destinations, strict=True)
        self.rows = {key: row for row, key in enumerate(keys)}
        pairs = zip(self.source_sites, self.destination_sites, strict=True)
        self.unmapped = sum(source is None or destination is None for source, destination in pairs)
        addresses = {*self.sources, *self.destinations}
        self.ip_by_host = {h: ip for h, ip in self.ip_by_host.items() if ip in addresses}
        known = self.ip_by_host_version.items()
        self.ip_by_host_version = {key: ip for key, ip in known if ip in addresses}
        self.names_version += 1

    def find_by_name(self, source: str, destination: str) -> int | None:
        """Row of the link between two endpoints, each given by IP or host name."""
        for version in (0, 6, 4):  # an end still keyed by name may carry its IP version
            pair = (self._identity(source, version), self._identity(destination, version))
            if (row := self.rows.get(pair)) is not None:
                return row
        return None

    def add_restored(
        self,
        sources: list[str],
        destinations: list[str],
        source_hosts: list[str],
        destination_hosts: list[str],
    ) -> None:
        """Re-add a snapshot's links, in row order, after the existing rows.

        Rows with both addresses teach host addresses again; rows keyed by a host name do not.
        Each distinct end's site and address check are worked out once: 100,000 links have a
        few hundred hosts.
        """
        site_of = functools.cache(self.topology.site_of)
        is_ip = functools.cache(lambda text: canonical_ip(text) is not None)
        links = zip(sources, destinations, source_hosts, destination_hosts, strict=True)
        for link in links:
            source, destination, source_host, destination_host = map(sys.intern, link)
            self.rows[(source, destination)] = len(self.sources)
            self.sources.append(source)
            self.destinations.append(destination)
            self.source_hosts.append(source_host)
            self.destination_hosts.append(destination_host)
            self.source_sites.append(site := site_of(source_host, source))
            self.destination_sites.append(other := site_of(destination_host, destination))
            self.unmapped += site is None or other is None
            if is_ip(source) and is_ip(destination):
                self._learn(source_host, source)
                self._learn(destination_host, destination)

    def _row_for_named(
        self, link: NamedEndpoints, admit: Callable[[], bool] | None = None
    ) -> int | None:
        source = self._resolve(link.source_host, link.source, link.ip_version)
        destination = self._resolve(link.destination_host, link.destination, link.ip_version)
        key = (source, destination)
        row = self.rows.get(key)
        if row is None:
            hosts = (link.source_host, link.destination_host)
            row = self._adopt(key, _name_keys(key, *(named(h, link.ip_version) for h in hosts)))
            if row is None and (admit is None or admit()):
                return self._append(key, link.source_host, link.destination_host, learn=False)
        return row

    def _claimed(self, host: str, address: str) -> str:
        """The name a bus message gives the end at `address`, unless that name is bound to
        another address of its version (then the address itself, and a conflict listed)."""
        name = host_key(host)
        if host == address or not name:
            return host
        version = 6 if ":" in address else 4
        bound = self.topology.address_of(name, version) or self.ip_by_host_version.get(
            (name, version)
        )
        if bound is None or bound == address:
            return host
        self.conflicts.append(f"host {name} is bound to {bound}; a message gives it {address}")
        return address

    def _rename(self, row: int, link: LinkEndpoints) -> None:
        """A bus message names an existing row's hosts otherwise: an end known by its address
        only takes the name (unless bound elsewhere); a named end keeps its name."""
        hosts = []
        ends = (
            (self.source_hosts[row], link.source_host, link.source),
            (self.destination_hosts[row], link.destination_host, link.destination),
        )
        for current, claimed, address in ends:
            if current in ("", address):
                current = self._claimed(claimed, address)
            elif claimed not in (current, address):
                conflict = f"host {address} is named {current}; a message says {claimed}"
                self.conflicts.append(conflict)
            hosts.append(current)
        if hosts != [self.source_hosts[row], self.destination_hosts[row]]:
            self._set_hosts(row, hosts[0], hosts[1], learn=True)
            self.names_version += 1

    def _resolve(self, host: str, address: str, ip_version: int) -> str:
        """An end's identity: its address as the bus revealed it, else as the inventory gives
        it, else as the run gives it, else the name."""
        if ip_version:
            learned = self.ip_by_host_version.get((host, ip_version))
        else:
            learned = self.ip_by_host.get(host)
        listed = self.topology.address_of(host, ip_version)
        return learned or listed or address or named(host, ip_version)

    def _identity(self, name: str, ip_version: int) -> str:
        """The identity a row would use for an end named `name` (an IP or a host name)."""
        host = host_key(name)
        known = self.ip_by_host.get(host) or self.topology.address_of(host, ip_version)
        return known or canonical_ip(name) or named(host, ip_version)

    def _adopt(self, key: Key, name_keys: list[Key]) -> int | None:
        """The row of this link still keyed by a host name, re-keyed to `key`; None if none."""
        for old in name_keys:
            row = self.rows.pop(old, None)
            if row is not None:
                self.rows[key] = row
                self.sources[row], self.destinations[row] = sys.intern(key[0]), sys.intern(key[1])
                self._set_sites(row)
                self.names_version += 1
                return row
        return None

    def _append(self, key: Key, source_host: str, destination_host: str, learn: bool) -> int:
        """New row; names are interned, so thousands of links share one string per host."""
        row = len(self.sources)
        source, destination = sys.intern(key[0]), sys.intern(key[1])
        self.rows[(source, destination)] = row
        self.sources.append(source)
        self.destinations.append(destination)
        self.source_hosts.append("")
        self.destination_hosts.append("")
        self.source_sites.append(None)
        self.destination_sites.append(None)
        self.unmapped += 1
        self._set_hosts(row, source_host, destination_host, learn)
        return row

    def _set_hosts(self, row: int, source_host: str, destination_host: str, learn: bool) -> None:
        self.source_hosts[row] = sys.intern(source_host)
        self.destination_hosts[row] = sys.intern(destination_host)
        self._set_sites(row)
        if learn:
            self._learn(source_host, self.sources[row])
            self._learn(destination_host, self.destinations[row])

    def _set_sites(self, row: int) -> None:
        self.unmapped -= self._is_unmapped(row)
        self.source_sites[row] = self.topology.site_of(self.source_hosts[row], self.sources[row])
        self.destination_sites[row] = self.topology.site_of(
            self.destination_hosts[row], self.destinations[row]
        )
        self.unmapped += self._is_unmapped(row)

    def _is_unmapped(self, row: int) -> bool:
        return self.source_sites[row] is None or self.destination_sites[row] is None

    def _learn(self, host: str, address: str) -> None:
        """Bind `host` to `address` unless it is bound already (the first binding stays)."""
        name = host_key(host)
        self.ip_by_host.setdefault(name, address)
        self.ip_by_host_version.setdefault((name, 6 if ":" in address else 4), address)


def named(host: str, ip_version: int) -> str:
    """The identity of an end known by host name only, of a given IP version (0: either).

    >>> named("ps.example.org", 0), named("ps.example.org", 6)
    ('ps.example.org', 'ipv6:ps.example.org')
    """
    return f"ipv{ip_version}:{host}" if ip_version else host


def _bus_name_keys(link: LinkEndpoints) -> list[Key]:
    """Keys a row of this bus link may have had while a run knew its ends by name only."""
    key = (link.source, link.destination)
    hosts = [
        None if canonical_ip(h) else host_key(h) for h in (link.source_host, link.destination_host)
    ]
    version = 6 if ":" in link.source else 4
    typed = [None if h is None else named(h, version) for h in hosts]
    return _name_keys(key, *typed) + _name_keys(key, *hosts)


def _name_keys(key: Key, source_name: str | None, destination_name: str | None) -> list[Key]:
    """Keys a row of the link `key` may have had while an end was known by host name only."""
    (source, destination), names = key, (source_name, destination_name)
    pairs = [(source, names[1]), (names[0], destination), names]
    return list(dict.fromkeys((s, d) for s, d in pairs if s and d and (s, d) != key))
