"""The topology layouts `--topology` accepts, told apart by content, each parsed to a Topology.

- `sites`: the operator's own `{site: [host name or IP, ...]}` (YAML or JSON).
- `cric-rcsite`: CRIC's `rcsite` export, `{site: {"name", "services": [{"type": "PerfSonar",
  "endpoint": host}, ...], "netroutes": {route: {"networks": {"ipv4": [...], "ipv6": [...]}}}}}`.
- `cric-services`: CRIC's PerfSonar service query, `{key: {"endpoint": host, "rcsite": site}}`.
- `psconfig`: a pSConfig document, `{"addresses": {name: {"address", "host", "_meta": {...}}}}`,
  the site in each address's `_meta` under a chosen key (the web admin writes `display-name`);
  an entry that names a host and gives an IP pairs the two (`Topology.address_of`).

Every function here takes decoded JSON/YAML and raises ValueError saying what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from service.parse.addresses import canonical_ip
from service.topology.topology import Topology

#: The `_meta` key of a pSConfig address that names its site, unless told otherwise.
PSCONFIG_SITE_KEY = "display-name"


class Layout(StrEnum):
    SITES = "sites"
    CRIC_RCSITE = "cric-rcsite"
    CRIC_SERVICES = "cric-services"
    PSCONFIG = "psconfig"


def detect_layout(document: Any) -> Layout:
    """Which layout `document` is in; ValueError naming the accepted ones when it is none.

    >>> detect_layout({"CERN": ["ps.cern.ch"]}), detect_layout({"addresses": {}})
    (<Layout.SITES: 'sites'>, <Layout.PSCONFIG: 'psconfig'>)
    >>> detect_layout({"X": {"endpoint": "ps.x.org", "rcsite": "X"}})
    <Layout.CRIC_SERVICES: 'cric-services'>
    """
    if not isinstance(document, dict):
        raise ValueError(f"expected an object, not {_kind(document)}; {_ACCEPTED}")
    if not document:
        raise ValueError(f"an empty object; {_ACCEPTED}")
    if isinstance(document.get("addresses"), dict):
        return Layout.PSCONFIG
    values = document.values()
    if all(isinstance(value, list) for value in values):
        return Layout.SITES
    objects = all(isinstance(value, dict) for value in values)
    if objects and all("netroutes" in value or "services" in value for value in values):
        return Layout.CRIC_RCSITE
    if objects and all({"endpoint", "rcsite"} <= value.keys() for value in values):
        return Layout.CRIC_SERVICES
    key, value = next(iter(document.items()))
    raise ValueError(f"no known layout (e.g. {key!r} is {_kind(value)}); {_ACCEPTED}")


def parse_topology(document: Any, site_key: str = PSCONFIG_SITE_KEY) -> tuple[Layout, Topology]:
    """The layout of `document` and the Topology it describes."""
    layout = detect_layout(document)
    if layout is Layout.SITES:
        topology = Topology.from_mapping({str(site): hosts for site, hosts in document.items()})
    elif layout is Layout.PSCONFIG:
        addresses = document["addresses"]
        topology = Topology.from_inventory(
            _psconfig_hosts(addresses, site_key), [], _psconfig_addresses(addresses)
        )
    elif layout is Layout.CRIC_SERVICES:
        topology = Topology.from_inventory(_service_hosts(document), [])
    else:
        topology = Topology.from_inventory(_rcsite_hosts(document), _rcsite_networks(document))
    if not topology.sites:
        hint = (
            f" (no address has _meta.{site_key}: see --psconfig-site-key)"
            if layout is Layout.PSCONFIG
            else ""
        )
        raise ValueError(f"{layout} layout names no site with a host or network{hint}")
    return layout, topology


def _rcsite_hosts(document: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for key, site in document.items():
        name = _site_name(site, key)
        for service in _list(site.get("services"), f"{key}.services"):
            if isinstance(service, dict) and str(service.get("type", "")).lower() == "perfsonar":
                yield from _endpoint(service, name)


def _rcsite_networks(document: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for key, site in document.items():
        name = _site_name(site, key)
        routes = site.get("netroutes") or {}
        if not isinstance(routes, dict):
            raise ValueError(f"{key}.netroutes is {_kind(routes)}, expected an object")
        for route_name, route in routes.items():
            networks = route.get("networks") if isinstance(route, dict) else None
            where = f"{key}.netroutes.{str(route_name).strip()}.networks"
            if not isinstance(networks, dict | None):
                raise ValueError(f"{where} is {_kind(networks)}, expected an object")
            for family in ("ipv4", "ipv6"):
                for cidr in _list((networks or {}).get(family), f"{where}.{family}"):
                    yield str(cidr), name


def _service_hosts(document: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for service in document.values():
        if str(service.get("type", "PerfSonar")).lower() == "perfsonar":
            yield from _endpoint(service, str(service["rcsite"]))


def _psconfig_hosts(addresses: Mapping[str, Any], site_key: str) -> Iterator[tuple[str, str]]:
    """Every name an address goes by (its key, `address`, `host`) with its `_meta` site."""
    for name, entry in addresses.items():
        meta = entry.get("_meta") if isinstance(entry, dict) else None
        site = meta.get(site_key) if isinstance(meta, dict) else None
        if isinstance(site, str) and site.strip():
            for host in (name, entry.get("address"), entry.get("host")):
                if isinstance(host, str) and host.strip():
                    yield host, site.strip()


def _psconfig_addresses(addresses: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(host name, IP) of every address entry whose names (key, `address`, `host`) include both.

    >>> list(_psconfig_addresses({"192.0.2.77": {"address": "192.0.2.77", "host": "ps.c.org"},
    ...                           "ps.a.org": {"address": "ps.a.org"}}))
    [('ps.c.org', '192.0.2.77')]
    """
    for name, entry in addresses.items():
        if not isinstance(entry, dict):
            continue
        names = {
            n.strip() for n in (name, entry.get("address"), entry.get("host")) if isinstance(n, str)
        }
        ips = {ip for ip in map(canonical_ip, names) if ip}
        for host in sorted(n for n in names if n and canonical_ip(n) is None):
            for ip in sorted(ips):
                yield host, ip


def _endpoint(service: Mapping[str, Any], site: str) -> Iterator[tuple[str, str]]:
    host = endpoint_host(str(service.get("endpoint") or "").strip())
    if host:
        yield host, site


def endpoint_host(endpoint: str) -> str:
    """The host of a service endpoint, which CRIC may write with a scheme or port.

    >>> endpoint_host("psum01.aglt2.org"), endpoint_host("https://ps.example.org:443/toolkit")
    ('psum01.aglt2.org', 'ps.example.org')
    >>> endpoint_host("2001:db8::1"), endpoint_host("[2001:db8::1]:861")
    ('2001:db8::1', '2001:db8::1')
    """
    if canonical_ip(endpoint):
        return endpoint
    try:
        return urlsplit(endpoint if "://" in endpoint else f"//{endpoint}").hostname or ""
    except ValueError:  # e.g. an unclosed "[": kept as written, it matches no message
        return endpoint


def _site_name(site: Any, key: str) -> str:
    name = site.get("name") if isinstance(site, dict) else None
    return str(name).strip() if name else key


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where} is {_kind(value)}, expected a list")
    return value


def _kind(value: Any) -> str:
    names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


_ACCEPTED = (
    "accepted: {site: [host or IP, ...]}, a CRIC rcsite export, a CRIC PerfSonar service query "
    "or a pSConfig document with addresses"
)
