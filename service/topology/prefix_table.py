"""Longest-prefix match of IP addresses to sites, over IPv4 and IPv6 networks."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class PrefixTable:
    """Per IP version: prefix length -> {network address as int: site}, lengths longest first.

    A lookup masks the address once per distinct prefix length, so it costs a few dictionary
    probes however many networks there are.

    >>> table = PrefixTable.build([
    ...     (ipaddress.ip_network("10.0.0.0/8"), "WIDE"),
    ...     (ipaddress.ip_network("10.1.0.0/16"), "NARROW"),
    ...     (ipaddress.ip_network("2001:db8::/32"), "V6"),
    ... ])
    >>> [table.lookup(ipaddress.ip_address(a)) for a in ("10.1.2.3", "10.2.0.1", "2001:db8::1")]
    ['NARROW', 'WIDE', 'V6']
    >>> table.lookup(ipaddress.ip_address("192.0.2.1")) is None
    True
    """

    levels: dict[int, tuple[tuple[int, dict[int, str]], ...]]

    @classmethod
    def build(cls, entries: Iterable[tuple[Network, str]]) -> PrefixTable:
        """Table of `(network, site)`; one network given to two sites is the caller's to refuse."""
        by_length: dict[int, dict[int, dict[int, str]]] = {4: {}, 6: {}}
        for network, site in entries:
            level = by_length[network.version].setdefault(network.prefixlen, {})
            level[int(network.network_address)] = site
        return cls(
            {
                version: tuple(sorted(lengths.items(), reverse=True))
                for version, lengths in by_length.items()
            }
        )

    def lookup(self, ip: Address) -> str | None:
        """Site of the longest network holding `ip` (IPv4-mapped IPv6 as IPv4), else None."""
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        value, bits = int(ip), ip.max_prefixlen
        for length, networks in self.levels[ip.version]:
            site = networks.get(value >> (bits - length) << (bits - length))
            if site is not None:
                return site
        return None
