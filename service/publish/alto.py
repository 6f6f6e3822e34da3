"""ALTO (RFC 7285) views of the cost matrix: directory, network map and cost maps.

PIDs are sites; a host without a site stands for itself (as in `views.aggregate_sites`). Each
PID lists its hosts' addresses as /32 or /128 prefixes. PID names keep the site name when it is
already valid (letters, digits, '-', ':', '@', '_'; at most 64 characters); any other name has
each invalid character replaced by '_', is cut to leave room, and gets '_' plus 8 hex digits
of a BLAKE2b hash of the original appended (16 or 32 digits if that name is taken), so names
stay unique and the same site always gets the same PID within one set of sites.

The network map's vtag is a hash of its content (PID names and addresses): it changes exactly
when a PID or an address appears or goes. Cost maps (`priv:nettel-cost`, RFC 9439's `delay-ow`
in microseconds and `lossrate` in percent) are numerical site-to-site values from the site-level
aggregation and name that vtag in `dependent-vtags`.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Request, Response

from service.matrix.link_record import LinkRecord, site_key

DIRECTORY_MEDIA = "application/alto-directory+json"
NETWORK_MAP_MEDIA = "application/alto-networkmap+json"
COST_MAP_MEDIA = "application/alto-costmap+json"
ERROR_MEDIA = "application/alto-error+json"
NETWORK_MAP_ID = "networkmap"
PID_MAX_LENGTH = 64
_INVALID_PID_CHARS = re.compile(r"[^A-Za-z0-9\-:@_]")


@dataclass(frozen=True)
class CostMetric:
    """One cost metric offered as a numerical cost map."""

    name: str
    description: str
    value: Callable[[LinkRecord], float | None]
    cost_source: str | None = None

    @property
    def slug(self) -> str:
        return self.name.removeprefix("priv:")


def _scaled(value: float | None, factor: float, digits: int) -> float | None:
    return None if value is None else round(value * factor, digits)


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
    )
}


def build_pid_names(keys: Iterable[str]) -> dict[str, str]:
    """Site key -> unique valid PID name (valid names kept as they are).

    >>> build_pid_names(["CERN-PROD", "ps.ral.ac.uk"])["ps.ral.ac.uk"][:13]
    'ps_ral_ac_uk_'
    """
    ordered = sorted(set(keys))
    names = {key: key for key in ordered if is_valid_pid(key)}
    taken = set(names.values())
    for key in ordered:
        if key not in names:
            names[key] = _hashed_pid(key, taken)
            taken.add(names[key])
    return names


def is_valid_pid(name: str) -> bool:
    return 0 < len(name) <= PID_MAX_LENGTH and not _INVALID_PID_CHARS.search(name)


def _hashed_pid(key: str, taken: set[str]) -> str:
    stem = _INVALID_PID_CHARS.sub("_", key)
    digest = hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
    candidates = [f"{stem[: PID_MAX_LENGTH - 1 - size]}_{digest[:size]}" for size in (8, 16, 32)]
    return next((name for name in candidates if name not in taken), candidates[-1])


class AltoView:
    """ALTO documents of one snapshot, from its host links and their site-level aggregation."""

    def __init__(self, links: Sequence[LinkRecord], site_links: Sequence[LinkRecord]) -> None:
        self._links = links
        self._site_links = site_links

    @cached_property
    def pids(self) -> dict[str, str]:
        return build_pid_names(self._addresses)

    @cached_property
    def network_map(self) -> dict[str, dict[str, list[str]]]:
        return {self.pids[key]: _prefixes(ips) for key, ips in sorted(self._addresses.items())}

    @cached_property
    def vtag(self) -> str:
        content = orjson.dumps(self.network_map, option=orjson.OPT_SORT_KEYS)
        return hashlib.blake2b(content, digest_size=20).hexdigest()

    def network_map_document(self) -> dict[str, Any]:
        meta = {"vtag": {"resource-id": NETWORK_MAP_ID, "tag": self.vtag}}
        return {"meta": meta, "network-map": self.network_map}

    def cost_map_document(self, metric: CostMetric) -> dict[str, Any]:
        cost_map: dict[str, dict[str, float]] = defaultdict(dict)
        for link in self._site_links:
            value = metric.value(link)
            if value is not None:
                cost_map[self.pids[link["source"]]][self.pids[link["destination"]]] = value
        meta = {
            "dependent-vtags": [{"resource-id": NETWORK_MAP_ID, "tag": self.vtag}],
            "cost-type": {"cost-mode": "numerical", "cost-metric": metric.name},
        }
        return {"meta": meta, "cost-map": cost_map}

    @cached_property
    def _addresses(self) -> dict[str, set[str]]:
        addresses: dict[str, set[str]] = defaultdict(set)
        for link in self._links:
            for side in ("source", "destination"):
                addresses[site_key(link, side)].add(link[side])
        return addresses


def _prefixes(ips: Iterable[str]) -> dict[str, list[str]]:
    """{"ipv4": [...], "ipv6": [...]} host prefixes; entries that are not IPs are left out."""
    prefixes: dict[str, list[str]] = defaultdict(list)
    for ip in ips:
        try:
            network = ipaddress.ip_network(ip)
        except ValueError:
            continue
        prefixes[f"ipv{network.version}"].append(str(network))
    return {family: sorted(values) for family, values in sorted(prefixes.items())}


def directory_document(base_url: str) -> dict[str, Any]:
    """The information resource directory: the network map and one cost map per metric."""
    cost_types = {f"num-{m.slug}": _cost_type(m) for m in METRICS.values()}
    resources: dict[str, Any] = {
        NETWORK_MAP_ID: {"uri": f"{base_url}alto/networkmap", "media-type": NETWORK_MAP_MEDIA}
    }
    for metric in METRICS.values():
        resources[f"costmap-{metric.slug}"] = {
            "uri": f"{base_url}alto/costmap/{metric.name}",
            "media-type": COST_MAP_MEDIA,
            "capabilities": {"cost-type-names": [f"num-{metric.slug}"]},
            "uses": [NETWORK_MAP_ID],
        }
    meta = {"cost-types": cost_types, "default-alto-network-map": NETWORK_MAP_ID}
    return {"meta": meta, "resources": resources}


def _cost_type(metric: CostMetric) -> dict[str, Any]:
    cost_type: dict[str, Any] = {"cost-mode": "numerical", "cost-metric": metric.name}
    if metric.cost_source:
        cost_type["cost-context"] = {"cost-source": metric.cost_source}
    return cost_type | {"description": metric.description}


def error_document(code: str, field: str, value: str) -> dict[str, Any]:
    """An ALTO error (RFC 7285 section 8.5.2)."""
    return {"meta": {"code": code, "field": field, "value": value}}


def build_alto_router(current_view: Callable[..., AltoView]) -> APIRouter:
    """`GET /alto`, `/alto/networkmap`, `/alto/costmap/{metric}`; `current_view` is the
    dependency giving the latest matrix's view (it may raise 503)."""
    router = APIRouter(prefix="/alto", tags=["ALTO"])

    @router.get("", response_class=Response)
    def directory(request: Request) -> Response:
        """ALTO information resource directory (RFC 7285 section 9)."""
        return _alto(directory_document(str(request.base_url)), DIRECTORY_MEDIA)

    @router.get("/networkmap", response_class=Response)
    def network_map(view: AltoView = Depends(current_view)) -> Response:
        """ALTO network map: one PID per site with its hosts' address prefixes."""
        return _alto(view.network_map_document(), NETWORK_MAP_MEDIA)

    @router.get("/costmap/{metric}", response_class=Response, responses={404: {}})
    def cost_map(metric: str, view: AltoView = Depends(current_view)) -> Response:
        """ALTO numerical cost map for `priv:nettel-cost`, `delay-ow` or `lossrate`."""
        if metric not in METRICS:
            error = error_document("E_INVALID_FIELD_VALUE", "cost-metric", metric)
            return _alto(error, ERROR_MEDIA, status_code=404)
        return _alto(view.cost_map_document(METRICS[metric]), COST_MAP_MEDIA)

    return router


def _alto(document: dict[str, Any], media_type: str, status_code: int = 200) -> Response:
    return Response(orjson.dumps(document), status_code=status_code, media_type=media_type)
