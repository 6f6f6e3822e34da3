"""A small ALTO client written from RFC 7285, doing what a replica sorter does with one.

It knows nothing of nettel: it starts from the information resource directory (section 9),
picks resources by media type, `accepts` and cost type, reads the network map's prefixes for
longest-prefix lookups (section 11.2.1), and asks the endpoint cost service (section 11.5) and
filtered cost maps (section 11.3.2). Like deployed clients, it checks that every reply carries
exactly the media type it asked for (the whole `Content-Type` header), and turns
`application/alto-error+json` replies into `AltoErrorReply`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

DIRECTORY = "application/alto-directory+json"
NETWORK_MAP = "application/alto-networkmap+json"
COST_MAP = "application/alto-costmap+json"
COST_MAP_FILTER = "application/alto-costmapfilter+json"
ENDPOINT_COST = "application/alto-endpointcost+json"
ENDPOINT_COST_PARAMS = "application/alto-endpointcostparams+json"
ERROR = "application/alto-error+json"


class AltoErrorReply(Exception):
    """An ALTO error reply: HTTP status and the error's `meta` (code, field, value...)."""

    def __init__(self, status: int, meta: dict[str, Any]) -> None:
        super().__init__(status, meta)
        self.status, self.meta = status, meta


@dataclass(frozen=True)
class Resource:
    """One entry of the directory, with the cost types its capabilities name."""

    resource_id: str
    uri: str
    media_type: str
    accepts: str | None
    cost_types: tuple[dict[str, Any], ...]
    uses: tuple[str, ...]


class PidLookup:
    """Address -> PID by longest prefix over a network map (section 11.2.1)."""

    def __init__(self, network_map: Mapping[str, Mapping[str, list[str]]]) -> None:
        self.prefixes = [
            (ipaddress.ip_network(prefix), pid)
            for pid, families in network_map.items()
            for family in ("ipv4", "ipv6")
            for prefix in families.get(family, [])
        ]

    def pid_of(self, ip: str) -> str | None:
        address = ipaddress.ip_address(ip)
        holding = [(net.prefixlen, pid) for net, pid in self.prefixes if address in net]
        return max(holding)[1] if holding else None


class AltoClient:
    """ALTO over one `httpx.Client`, starting from the directory at `directory_uri`."""

    def __init__(self, http: httpx.Client, directory_uri: str) -> None:
        self.http = http
        self.directory = self.get(directory_uri, DIRECTORY)
        self.resources = [
            _resource(rid, entry, self.directory["meta"]["cost-types"])
            for rid, entry in self.directory["resources"].items()
        ]

    def find(
        self, media_type: str, accepts: str | None = None, metric: str | None = None
    ) -> Resource:
        """The one resource of `media_type` taking `accepts` (None: GET) and offering `metric`."""
        found = [
            resource
            for resource in self.resources
            if resource.media_type == media_type
            and resource.accepts == accepts
            and (metric is None or metric in [t["cost-metric"] for t in resource.cost_types])
        ]
        assert len(found) == 1, f"{len(found)} resources of {media_type} for {metric}"
        return found[0]

    def network_map(self) -> tuple[dict[str, Any], PidLookup]:
        """The default network map (section 9.1) and a PID lookup over it."""
        default = self.directory["meta"]["default-alto-network-map"]
        entry = next(r for r in self.resources if r.resource_id == default)
        document = self.get(entry.uri, NETWORK_MAP)
        return document, PidLookup(document["network-map"])

    def endpoint_costs(
        self, metric: str, srcs: Iterable[str], dsts: Iterable[str]
    ) -> dict[str, dict[str, float]]:
        """Source IP -> destination IP -> cost, for the pairs the server has a cost for."""
        service = self.find(ENDPOINT_COST, ENDPOINT_COST_PARAMS, metric)
        typed_srcs = {typed_address(ip): ip for ip in srcs}
        typed_dsts = {typed_address(ip): ip for ip in dsts}
        request = {
            "cost-type": {"cost-mode": "numerical", "cost-metric": metric},
            "endpoints": {"srcs": list(typed_srcs), "dsts": list(typed_dsts)},
        }
        reply = self.post(service.uri, ENDPOINT_COST_PARAMS, request, ENDPOINT_COST)
        assert reply["meta"]["cost-type"] == request["cost-type"]
        return {
            typed_srcs[src]: {typed_dsts[dst]: cost for dst, cost in row.items()}
            for src, row in reply["endpoint-cost-map"].items()
        }

    def filtered_cost_map(self, metric: str, srcs: list[str], dsts: list[str]) -> dict[str, Any]:
        resource = self.find(COST_MAP, COST_MAP_FILTER, metric)
        request = {
            "cost-type": {"cost-mode": "numerical", "cost-metric": metric},
            "pids": {"srcs": srcs, "dsts": dsts},
        }
        return self.post(resource.uri, COST_MAP_FILTER, request, COST_MAP)

    def get(self, uri: str, media_type: str) -> dict[str, Any]:
        return _reply(self.http.get(uri, headers={"Accept": f"{media_type},{ERROR}"}), media_type)

    def post(
        self, uri: str, body_type: str, body: dict[str, Any], media_type: str
    ) -> dict[str, Any]:
        headers = {"Content-Type": body_type, "Accept": f"{media_type},{ERROR}"}
        return _reply(self.http.post(uri, json=body, headers=headers), media_type)


def typed_address(ip: str) -> str:
    """`ipv4:...` / `ipv6:...` (section 10.4.1)."""
    return f"ipv{ipaddress.ip_address(ip).version}:{ip}"


def sort_replicas(
    client: AltoClient, metric: str, reader: str, replicas: Mapping[str, str]
) -> list[str]:
    """Replica names (name -> storage IP) cheapest first for `reader`, by the cost from each
    replica to the reader; replicas without a cost last, in name order."""
    costs = client.endpoint_costs(metric, replicas.values(), [reader])

    def key(name: str) -> tuple[bool, float, str]:
        cost = costs.get(replicas[name], {}).get(reader)
        return cost is None, cost or 0.0, name

    return sorted(replicas, key=key)


def _resource(rid: str, entry: dict[str, Any], cost_types: dict[str, Any]) -> Resource:
    names = entry.get("capabilities", {}).get("cost-type-names", [])
    return Resource(
        rid,
        entry["uri"],
        entry["media-type"],
        entry.get("accepts"),
        tuple(cost_types[name] for name in names),
        tuple(entry.get("uses", [])),
    )


def _reply(response: httpx.Response, media_type: str) -> dict[str, Any]:
    content_type = response.headers.get("content-type")
    if response.status_code >= 400 and content_type == ERROR:
        raise AltoErrorReply(response.status_code, response.json()["meta"])
    response.raise_for_status()
    assert content_type == media_type, f"{content_type!r} is not {media_type!r}"
    document: dict[str, Any] = response.json()
    return document
