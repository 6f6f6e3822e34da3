"""The ALTO network map: each PID's address prefixes and the longest-prefix lookup over them.

A PID lists its site's networks (`networks_of(site key)`, e.g. CRIC netroutes) and, as /32 or
/128, each address of its hosts that those networks would not lead back to it (so a site without
networks lists all its hosts). Networks are placed first, then host addresses; one claimed by
several sites goes to the first site key in sorted order. So every address has at most one PID
by longest-prefix match, the lookup a client makes in the network map (RFC 7285 section 11.2.1).
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from service.publish.alto.pids import build_pid_names
from service.topology.prefix_table import Address, Network, PrefixTable

NetworksOf = Callable[[str], Sequence[str]]


@dataclass(frozen=True)
class NetworkMap:
    """The PID of each site key, each PID's prefixes, and the address -> PID lookup."""

    pids: dict[str, str]
    prefixes: dict[str, dict[str, list[str]]]
    table: PrefixTable

    def pid_of(self, address: Address) -> str | None:
        return self.table.lookup(address)


def build_network_map(hosts: Mapping[str, Iterable[str]], networks_of: NetworksOf) -> NetworkMap:
    """`hosts`: site key -> its hosts' addresses (entries that are not IPs are left out).

    >>> cern = ["192.0.2.1", "198.51.100.7", "ps.named.example"]
    >>> nm = build_network_map({"CERN": cern, "RAL": ["2001:DB8::1"]},
    ...                        lambda key: ["192.0.2.0/24"] if key == "CERN" else [])
    >>> nm.prefixes
    {'CERN': {'ipv4': ['192.0.2.0/24', '198.51.100.7/32']}, 'RAL': {'ipv6': ['2001:db8::1/128']}}
    >>> nm.pid_of(ipaddress.ip_address("192.0.2.99")), nm.pid_of(ipaddress.ip_address("::2"))
    ('CERN', None)
    """
    pids = build_pid_names(hosts)
    keys = sorted(hosts)
    owners: dict[Network, str] = {}
    for key in keys:
        for network in map(ipaddress.ip_network, networks_of(key)):
            owners.setdefault(network, pids[key])
    networks = PrefixTable.build(owners.items())
    placed: set[Address] = set()
    for key in keys:
        for address in _addresses(hosts[key]):
            if address not in placed and networks.lookup(address) != pids[key]:
                owners.setdefault(ipaddress.ip_network(address), pids[key])
            placed.add(address)
    listed: dict[str, list[Network]] = {pid: [] for pid in pids.values()}
    for network, pid in owners.items():
        listed[pid].append(network)
    prefixes = {pid: _by_family(networks) for pid, networks in sorted(listed.items())}
    return NetworkMap(pids, prefixes, PrefixTable.build(owners.items()))


def _addresses(values: Iterable[str]) -> list[Address]:
    """The values that are IPs (an IPv4-mapped IPv6 one as IPv4, as lookups take it)."""
    addresses: list[Address] = []
    for value in sorted(set(values)):
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            continue
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        addresses.append(mapped or address)
    return addresses


def _by_family(networks: Iterable[Network]) -> dict[str, list[str]]:
    """{"ipv4": [...], "ipv6": [...]} in address order; a family without prefixes is left out."""
    families: dict[str, list[str]] = defaultdict(list)
    for network in sorted(networks, key=lambda net: (net.version, net)):
        families[f"ipv{network.version}"].append(str(network))
    return dict(families)
