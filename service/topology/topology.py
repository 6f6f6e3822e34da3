"""Which site each perfSONAR host belongs to: host names, addresses and the sites' networks.

A `Topology` is immutable; a refresh builds a new one, from one inventory or several merged.
`site_of` matches an exact host name, then an exact address, then the longest network (IPv4 or
IPv6) holding the address. An inventory that pairs host names with addresses (pSConfig) also
answers `address_of`, which gives a pScheduler run's named ends the identity the bus uses for
them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from service.parse.addresses import canonical_ip
from service.topology.prefix_table import Network, PrefixTable

_Key = TypeVar("_Key", str, Network, tuple[str, int])


def host_key(name: str) -> str:
    """A host name as the index compares it: lower case, no surrounding space or final dot.

    >>> host_key(" PS-Latency.Site-A.example.org. ")
    'ps-latency.site-a.example.org'
    """
    return name.strip().rstrip(".").lower()


@dataclass(frozen=True)
class Topology:
    """Host name or address -> site, and site -> its networks; empty without a topology.

    Built by `from_mapping` (a host list) or `from_inventory` (hosts and networks).
    """

    #: `host_key` of a host name, or an address in canonical form -> site.
    site_by_host: dict[str, str] = field(default_factory=dict)
    #: Site -> its networks as canonical CIDR text (IPv4 then IPv6, each in address order).
    networks_by_site: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Inventory entries left out of matching, each with why (e.g. a network of two sites).
    skipped: tuple[str, ...] = ()
    #: `networks_by_site` as a lookup table (`from_inventory` builds both from one parse).
    prefixes: PrefixTable = field(
        default_factory=lambda: PrefixTable.build(()), repr=False, compare=False
    )
    #: (`host_key` of a host name, 4 or 6) -> the address the inventory pairs it with.
    address_by_host: dict[tuple[str, int], str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, sites: dict[str, list[str]]) -> Topology:
        """Build from `{site: [host name or IP, ...]}`; a host under two sites is an error."""
        site_by_host: dict[str, str] = {}
        for site, hosts in sites.items():
            for host in hosts:
                key = entry_key(str(host))
                if site_by_host.get(key, site) != site:
                    raise ValueError(
                        f"host {host!r} is listed under {site_by_host[key]!r} and {site!r}"
                    )
                site_by_host[key] = str(site)
        return cls(site_by_host)

    @classmethod
    def from_inventory(
        cls,
        hosts: Iterable[tuple[str, str]],
        networks: Iterable[tuple[str, str]],
        addresses: Iterable[tuple[str, str]] = (),
    ) -> Topology:
        """Build from an inventory's `(host name or IP, site)`, `(CIDR, site)` and `(host name,
        IP)` pairs.

        An inventory is not the operator's to fix, so a host or network it gives two sites, a
        host name it gives two addresses of one IP version and a network that does not parse are
        left out (named in `skipped`), not refused.
        """
        site_by_host, skipped = _unambiguous((entry_key(host), site) for host, site in hosts)
        address_by_host, two_addresses = _unambiguous(_address_keys(addresses))
        skipped += two_addresses
        parsed: list[tuple[Network, str]] = []
        for cidr, site in networks:
            try:
                parsed.append((ipaddress.ip_network(cidr.strip(), strict=False), site))
            except ValueError:
                skipped.append(f"network {cidr!r} of {site!r} is not an IP network")
        site_by_network, ambiguous = _unambiguous(parsed)
        grouped: dict[str, list[Network]] = {}
        for network, site in site_by_network.items():
            grouped.setdefault(site, []).append(network)
        by_site = {site: _network_order(networks) for site, networks in sorted(grouped.items())}
        table = PrefixTable.build(site_by_network.items())
        return cls(site_by_host, by_site, tuple(skipped + ambiguous), table, address_by_host)

    @classmethod
    def merged(cls, parts: Sequence[Topology]) -> Topology:
        """One topology from several inventories (say CRIC's networks and pSConfig's host
        addresses); what two of them give different sites (or a host two addresses) is left
        out, as within one inventory. A single part is returned as it is.

        >>> cric = Topology.from_inventory([("ps.a.org", "A")], [("192.0.2.0/24", "A")])
        >>> mesh = Topology.from_inventory([("ps.a.org", "A")], [], [("ps.a.org", "192.0.2.9")])
        >>> both = Topology.merged([cric, mesh])
        >>> both.site_of("", "192.0.2.200"), both.address_of("ps.a.org", 4), both.skipped
        ('A', '192.0.2.9', ())
        """
        if len(parts) == 1:
            return parts[0]
        merged = cls.from_inventory(
            [pair for part in parts for pair in part.site_by_host.items()],
            [
                (network, site)
                for part in parts
                for site, networks in part.networks_by_site.items()
                for network in networks
            ],
            [(host, ip) for part in parts for (host, _), ip in part.address_by_host.items()],
        )
        skipped = tuple(entry for part in parts for entry in part.skipped) + merged.skipped
        return replace(merged, skipped=skipped)

    @property
    def sites(self) -> list[str]:
        return sorted(set(self.site_by_host.values()) | set(self.networks_by_site))

    def networks_of(self, site: str) -> tuple[str, ...]:
        """The site's networks as canonical CIDR text, IPv4 then IPv6, each in address order;
        empty when the topology gives it none (a host list, a pSConfig file, an unknown site).

        >>> topology = Topology.from_inventory(
        ...     [], [("2001:DB8::/32", "A"), ("192.0.2.7/24", "A"), ("10.0.0.0/8", "A")]
        ... )
        >>> topology.networks_of("A"), topology.networks_of("B")
        (('10.0.0.0/8', '192.0.2.0/24', '2001:db8::/32'), ())
        """
        return self.networks_by_site.get(site, ())

    def address_of(self, host: str, ip_version: int) -> str | None:
        """The address the inventory pairs with host name `host`, of IP version 4 or 6 (0:
        either, IPv4 first); None when it gives none.

        >>> topology = Topology.from_inventory([], [], [("PS.Site-C.org", "2001:DB8::7")])
        >>> topology.address_of("ps.site-c.org", 6), topology.address_of("ps.site-c.org", 4)
        ('2001:db8::7', None)
        >>> topology.address_of("ps.site-c.org.", 0)
        '2001:db8::7'
        """
        key = host_key(host)
        if ip_version:
            return self.address_by_host.get((key, ip_version))
        return self.address_by_host.get((key, 4)) or self.address_by_host.get((key, 6))

    def site_of(self, host: str, ip: str) -> str | None:
        """Site of an end: by host name, else by address, else by the longest network."""
        site = self.site_by_host.get(host_key(host))
        if site is not None:
            return site
        try:
            address = ipaddress.ip_address(ip.strip())
        except ValueError:  # an end known by name only
            return self.site_by_host.get(host_key(ip))
        return self.site_by_host.get(str(address)) or self.prefixes.lookup(address)


def entry_key(text: str) -> str:
    """A host name's `host_key`, or an address's canonical text."""
    return canonical_ip(text) or host_key(text)


def _address_keys(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[tuple[str, int], str]]:
    """((host name, IP version), canonical address) of `(host name, IP)` pairs."""
    for host, ip in pairs:
        address = ipaddress.ip_address(ip.strip())
        yield (host_key(host), address.version), str(address)


def _unambiguous(pairs: Iterable[tuple[_Key, str]]) -> tuple[dict[_Key, str], list[str]]:
    """`{key: value}` of keys given one value (a site, an address) only, and what was dropped
    for having two."""
    sites_of: dict[_Key, set[str]] = {}
    for key, site in pairs:
        sites_of.setdefault(key, set()).add(site)
    chosen = {key: next(iter(sites)) for key, sites in sites_of.items() if len(sites) == 1}
    dropped = [
        f"{_described(key)} is given to {', '.join(sorted(sites))}; matched to none"
        for key, sites in sites_of.items()
        if len(sites) > 1
    ]
    return chosen, dropped


def _described(key: str | Network | tuple[str, int]) -> str:
    return f"{key[0]} (IPv{key[1]})" if isinstance(key, tuple) else str(key)


def _network_order(networks: list[Network]) -> tuple[str, ...]:
    """Canonical CIDR text, IPv4 then IPv6, each in address order."""
    networks.sort(key=lambda n: (n.version, int(n.network_address), n.prefixlen))
    return tuple(str(network) for network in networks)
