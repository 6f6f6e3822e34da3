"""ALTO documents of one cost-matrix snapshot, and the directory that lists them (RFC 7285).

PIDs are sites (a host without a site stands for itself, as in `views.aggregate_sites`), with
their prefixes (`network`). The network map's vtag is a hash of its content (PID names and
prefixes): it changes exactly when a PID or a prefix appears or goes. Cost maps
(`priv:nettel-cost`, RFC 9439's `delay-ow` in microseconds, `lossrate` in percent and `tput`
in bytes per second, the latest perfSONAR throughput test of the pair: pairs without one are
left out) are numerical site-to-site values from the site-level aggregation and name that vtag in
`dependent-vtags`; a filtered cost map keeps the PIDs asked for. An endpoint cost is the host
link's value when the matrix measures that pair of addresses (with a value for the metric), else
the value between the addresses' PIDs (longest prefix); a pair with neither is left out.

A view is built once per snapshot; what requests read (the network map, per metric the site- and
host-level values) is built on first use, so a request is dictionary lookups.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from service.matrix.link_record import LinkRecord, site_key
from service.publish.alto.network import NetworkMap, NetworksOf, build_network_map
from service.publish.alto.protocol import (
    COST_MAP_FILTER_MEDIA,
    COST_MAP_MEDIA,
    ENDPOINT_COST_MEDIA,
    ENDPOINT_COST_PARAMS_MEDIA,
    EVENT_STREAM_MEDIA,
    MERGE_PATCH_MEDIA,
    NETWORK_MAP_MEDIA,
    UPDATE_STREAM_PARAMS_MEDIA,
)
from service.publish.alto.request_bodies import COST_MODE, Endpoint

NETWORK_MAP_ID = "networkmap"
ENDPOINT_COST_ID = "endpointcost"
UPDATE_STREAM_ID = "update-stream"
#: Source -> destination -> value (PIDs in cost maps, typed addresses in endpoint cost maps).
Costs = dict[str, dict[str, float]]
_NONE: Mapping[str, float] = {}


@dataclass(frozen=True)
class CostMetric:
    """One cost metric offered as a numerical cost map."""

    name: str
    description: str
    value: Callable[[LinkRecord], float | None]
    cost_source: str | None = None
    #: RFC 9439's `cost-context` `parameters` of the metric (how it is estimated), as pairs.
    parameters: tuple[tuple[str, str], ...] = ()

    @property
    def slug(self) -> str:
        return self.name.removeprefix("priv:")

    @property
    def cost_map_id(self) -> str:
        return f"costmap-{self.slug}"

    @property
    def filtered_cost_map_id(self) -> str:
        return f"filtered-costmap-{self.slug}"


def _scaled(value: float | None, factor: float, digits: int) -> float | None:
    return None if value is None else round(value * factor, digits)


#: RFC 9439 section 5.1.4 asks a `tput` estimation to name its congestion control and method.
TPUT_PARAMETERS = (
    (
        "congestion-control-algorithm",
        "the test tool's TCP default (iperf3, nuttcp: the host's, usually CUBIC, RFC 9438)",
    ),
    (
        "estimation",
        "the latest perfSONAR throughput test of the pair (a bulk TCP test of some seconds, run "
        "every few hours); at a site pair the newest among its host pairs. The value's age is "
        "throughput_age_s of /costmatrix",
    ),
)


METRICS: dict[str, CostMetric] = {
    metric.name: metric
    for metric in (
        CostMetric(
            "priv:nettel-cost",
            "nettel link cost: 0 idle and healthy .. 1 unusable",
            lambda link: link["cost"],
        ),
        CostMetric(
            "delay-ow",
            "mean one-way delay of the newest minute, microseconds",
            lambda link: _scaled(link["delay_ms"]["mean"], 1000, 1),
            "estimation",
        ),
        CostMetric(
            "lossrate",
            "packet loss of the newest minute, percent",
            lambda link: _scaled(link["packet_loss"], 100, 4),
            "estimation",
        ),
        CostMetric(
            "tput",
            "TCP throughput of the latest perfSONAR throughput test, bytes per second (tests "
            "run every few hours: a value may be hours old)",
            lambda link: _scaled(link["throughput_bps"], 1 / 8, 0),
            "estimation",
            TPUT_PARAMETERS,
        ),
    )
}


class AltoView:
    """ALTO documents of one snapshot, from its host links and their site-level aggregation.

    `version` names the snapshot (endpoint cost replies carry it as their vtag); `networks_of`
    gives a site's networks (CIDR strings), none by default; `listed_sites` are the inventory's
    sites with networks, which get a PID even while none of their links is measured (a client's
    longest-prefix lookup still finds their addresses' site).
    """

    def __init__(
        self,
        links: Sequence[LinkRecord],
        site_links: Sequence[LinkRecord],
        *,
        version: str,
        networks_of: NetworksOf | None = None,
        listed_sites: Iterable[str] = (),
    ) -> None:
        self._links = links
        self._listed_sites = listed_sites
        self._site_links = site_links
        self._version = version
        self._networks_of = networks_of or _no_networks
        self._site_costs: dict[str, Costs] = {}
        self._host_costs: dict[str, Costs] = {}

    def prepare(self) -> None:
        """Build every document's parts now (the matrix cycle does, before the snapshot is
        served), so that no request builds them."""
        _ = self.vtag
        for metric in METRICS.values():
            self.site_costs(metric)
            self.host_costs(metric)

    @cached_property
    def network(self) -> NetworkMap:
        return build_network_map(self._hosts_by_site, self._networks_of)

    @cached_property
    def vtag(self) -> str:
        content = orjson.dumps(self.network.prefixes, option=orjson.OPT_SORT_KEYS)
        return hashlib.blake2b(content, digest_size=20).hexdigest()

    def network_map_document(self) -> dict[str, Any]:
        meta = {"vtag": {"resource-id": NETWORK_MAP_ID, "tag": self.vtag}}
        return {"meta": meta, "network-map": self.network.prefixes}

    def cost_map_document(
        self,
        metric: CostMetric,
        srcs: Iterable[str] | None = None,
        dsts: Iterable[str] | None = None,
    ) -> dict[str, Any]:
        """The cost map of `metric`; with `srcs` or `dsts`, only those PIDs (None: all)."""
        costs = _filtered(self.site_costs(metric), srcs, dsts)
        meta = {
            "dependent-vtags": [{"resource-id": NETWORK_MAP_ID, "tag": self.vtag}],
            "cost-type": _cost_mode(metric),
        }
        return {"meta": meta, "cost-map": costs}

    def endpoint_cost_document(
        self, metric: CostMetric, srcs: Sequence[Endpoint], dsts: Sequence[Endpoint]
    ) -> dict[str, Any]:
        meta = {
            "cost-type": _cost_mode(metric),
            "vtag": {"resource-id": ENDPOINT_COST_ID, "tag": self._version},
        }
        return {"meta": meta, "endpoint-cost-map": self.endpoint_costs(metric, srcs, dsts)}

    def endpoint_costs(
        self, metric: CostMetric, srcs: Sequence[Endpoint], dsts: Sequence[Endpoint]
    ) -> Costs:
        """Typed source -> typed destination -> the host link's value, else its PIDs' value."""
        hosts, sites, pid_of = self.host_costs(metric), self.site_costs(metric), self.network.pid_of
        targets = [(dst.text, str(dst.address), pid_of(dst.address) or "") for dst in dsts]
        costs: Costs = {}
        for src in srcs:
            host_row = hosts.get(str(src.address), _NONE)
            site_row = sites.get(pid_of(src.address) or "", _NONE)  # "": in no PID
            row: dict[str, float] = {}
            for text, ip, pid in targets:
                value = host_row.get(ip)
                if value is None:
                    value = site_row.get(pid)
                if value is not None:
                    row[text] = value
            if row:
                costs[src.text] = row
        return costs

    def site_costs(self, metric: CostMetric) -> Costs:
        """Source PID -> destination PID -> value, for the site pairs with one."""
        costs = self._site_costs.get(metric.name)
        if costs is None:
            pids = self.network.pids
            ends = ((pids[x["source"]], pids[x["destination"]], x) for x in self._site_links)
            costs = self._site_costs[metric.name] = _costs(ends, metric)
        return costs

    def host_costs(self, metric: CostMetric) -> Costs:
        """Source IP -> destination IP -> value (IPs in their canonical text)."""
        costs = self._host_costs.get(metric.name)
        if costs is None:
            ips = self._canonical_ips
            ends = (
                (ips[x["source"]], ips[x["destination"]], x)
                for x in self._links
                if x["source"] in ips and x["destination"] in ips
            )
            costs = self._host_costs[metric.name] = _costs(ends, metric)
        return costs

    @cached_property
    def _hosts_by_site(self) -> dict[str, set[str]]:
        hosts: defaultdict[str, set[str]] = defaultdict(set)
        hosts.update((site, set()) for site in self._listed_sites)
        for link in self._links:
            for side in ("source", "destination"):
                hosts[site_key(link, side)].add(link[side])
        return hosts

    @cached_property
    def _canonical_ips(self) -> dict[str, str]:
        """The links' endpoints that are IPs -> canonical text (RFC 5952 for IPv6)."""
        canonical = {}
        for text in {link[side] for link in self._links for side in ("source", "destination")}:
            try:
                canonical[text] = str(ipaddress.ip_address(text))
            except ValueError:
                continue
        return canonical


def _no_networks(site: str) -> Sequence[str]:
    return ()


def _costs(ends: Iterable[tuple[str, str, LinkRecord]], metric: CostMetric) -> Costs:
    """Source -> destination -> the link's value, for (source, destination, link) with one."""
    costs: Costs = defaultdict(dict)
    for source, destination, link in ends:
        value = metric.value(link)
        if value is not None:
            costs[source][destination] = value
    return dict(costs)


def _filtered(costs: Costs, srcs: Iterable[str] | None, dsts: Iterable[str] | None) -> Costs:
    if srcs is None and dsts is None:
        return costs
    rows = costs.items() if srcs is None else ((s, costs[s]) for s in srcs if s in costs)
    wanted = None if dsts is None else set(dsts)
    filtered = {
        source: {pid: value for pid, value in row.items() if wanted is None or pid in wanted}
        for source, row in rows
    }
    return {source: row for source, row in filtered.items() if row}


def _cost_mode(metric: CostMetric) -> dict[str, str]:
    return {"cost-mode": COST_MODE, "cost-metric": metric.name}


def directory_document(base_url: str) -> dict[str, Any]:
    """The information resource directory (section 9): network map, cost maps (full and
    filtered, one of each per metric), the endpoint cost service, and the update stream service
    that pushes all of them (RFC 8895 section 6.3)."""
    type_names = {metric.name: f"num-{metric.slug}" for metric in METRICS.values()}
    resources: dict[str, Any] = {
        NETWORK_MAP_ID: {"uri": f"{base_url}alto/networkmap", "media-type": NETWORK_MAP_MEDIA}
    }
    for metric in METRICS.values():
        uri = f"{base_url}alto/costmap/{metric.name}"
        capabilities = {"cost-type-names": [type_names[metric.name]]}
        cost_map = {"uri": uri, "media-type": COST_MAP_MEDIA}
        resources[metric.cost_map_id] = cost_map | {
            "capabilities": capabilities,
            "uses": [NETWORK_MAP_ID],
        }
        resources[metric.filtered_cost_map_id] = cost_map | {
            "accepts": COST_MAP_FILTER_MEDIA,
            "capabilities": capabilities | {"cost-constraints": False},
            "uses": [NETWORK_MAP_ID],
        }
    resources[ENDPOINT_COST_ID] = {
        "uri": f"{base_url}alto/endpointcost",
        "media-type": ENDPOINT_COST_MEDIA,
        "accepts": ENDPOINT_COST_PARAMS_MEDIA,
        "capabilities": {"cost-constraints": False, "cost-type-names": list(type_names.values())},
    }
    patched = list(resources)  # every resource above has merge-patch updates
    resources[UPDATE_STREAM_ID] = {
        "uri": f"{base_url}alto/updates",
        "media-type": EVENT_STREAM_MEDIA,
        "accepts": UPDATE_STREAM_PARAMS_MEDIA,
        "uses": patched,
        "capabilities": {
            "incremental-change-media-types": dict.fromkeys(patched, MERGE_PATCH_MEDIA),
            "support-stream-control": True,
        },
    }
    cost_types = {type_names[m.name]: _described_cost_type(m) for m in METRICS.values()}
    meta = {"cost-types": cost_types, "default-alto-network-map": NETWORK_MAP_ID}
    return {"meta": meta, "resources": resources}


def _described_cost_type(metric: CostMetric) -> dict[str, Any]:
    cost_type: dict[str, Any] = dict(_cost_mode(metric))
    if metric.cost_source:
        cost_type["cost-context"] = {"cost-source": metric.cost_source}
        if metric.parameters:
            cost_type["cost-context"]["parameters"] = dict(metric.parameters)
    return cost_type | {"description": metric.description}
