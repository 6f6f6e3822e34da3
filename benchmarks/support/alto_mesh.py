"""The ALTO benchmarks' mesh: the link_fill hosts in 20 sites with /24 netroutes, as a CRIC
export, and endpoint cost requests over its hosts."""

from __future__ import annotations

import ipaddress
from typing import Any

import orjson

from benchmarks.support.corpus import sites_for
from benchmarks.support.link_fill import host_ip

SITES = 20
METRIC = "priv:nettel-cost"


def site_networks(n_links: int) -> dict[str, list[str]]:
    """Site -> the /24 of each of its hosts (host i goes to site i mod SITES)."""
    networks: dict[str, list[str]] = {}
    for host in range(sites_for(n_links)):
        network = ipaddress.ip_network(f"{host_ip(host)}/24", strict=False)
        networks.setdefault(f"SITE-{host % SITES:02d}", []).append(str(network))
    return networks


def cric_rcsite(networks: dict[str, list[str]]) -> dict[str, Any]:
    """A CRIC rcsite export of the sites: no services, one netroute holding their networks."""
    return {
        site: {
            "name": site,
            "services": [],
            "netroutes": {f"{site}-LHCONE": {"networks": {"ipv4": cidrs, "ipv6": []}}},
        }
        for site, cidrs in networks.items()
    }


def request_bodies(n_links: int, endpoints: int) -> dict[str, bytes]:
    """Scenario -> the endpoint cost request it posts."""
    hosts = [host_ip(host) for host in range(sites_for(n_links))][:endpoints]
    unmeasured = [str(ipaddress.ip_address(ip) + 190) for ip in hosts]  # .200: same /24, no link
    cost_type = {"cost-mode": "numerical", "cost-metric": METRIC}
    return {
        name: orjson.dumps(
            {
                "cost-type": cost_type,
                "endpoints": {
                    "srcs": [f"ipv4:{ip}" for ip in hosts],
                    "dsts": [f"ipv4:{ip}" for ip in destinations],
                },
            }
        )
        for name, destinations in (("hosts", hosts), ("sites", unmeasured))
    }
