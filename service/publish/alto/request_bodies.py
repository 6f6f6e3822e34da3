"""The bodies of ALTO's POST resources, checked into queries (RFC 7285 sections 11.3.2.3 and
11.5.1.3; RFC 8895 section 6.5 for update streams).

A field that is missing, of the wrong JSON type or of a value nettel does not offer raises
`E_MISSING_FIELD`, `E_INVALID_FIELD_TYPE` or `E_INVALID_FIELD_VALUE` naming it; a body that is
not a JSON object, a malformed PID name or typed endpoint address, `E_SYNTAX`. Cost constraints
are not offered (`cost-constraints` false): a request with any is refused. Entries listed twice
count once.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import orjson

from service.publish.alto.pids import is_valid_pid
from service.publish.alto.protocol import (
    E_INVALID_FIELD_TYPE,
    E_INVALID_FIELD_VALUE,
    E_MISSING_FIELD,
    E_SYNTAX,
    AltoError,
)
from service.topology.prefix_table import Address

#: At most this many (source, destination) pairs in one endpoint cost request.
MAX_ENDPOINT_PAIRS = 250_000
#: At most this many substreams in one update stream (RFC 8895), added at once or over time.
MAX_SUBSTREAMS = 64
COST_MODE = "numerical"
_ADDRESS_TYPES: dict[str, Callable[[str], Address]] = {
    "ipv4": ipaddress.IPv4Address,
    "ipv6": ipaddress.IPv6Address,
}


@dataclass(frozen=True)
class Endpoint:
    """A typed endpoint address (`ipv4:192.0.2.1`) as the request wrote it, and its address."""

    text: str
    address: Address


@dataclass(frozen=True)
class FilteredCostMapQuery:
    """Cost metric and PIDs asked for; None: every PID (the list was absent or empty)."""

    metric: str
    srcs: tuple[str, ...] | None
    dsts: tuple[str, ...] | None


@dataclass(frozen=True)
class EndpointCostQuery:
    metric: str
    srcs: tuple[Endpoint, ...]
    dsts: tuple[Endpoint, ...]


@dataclass(frozen=True)
class AddUpdate:
    """One `AddUpdateReq` (RFC 8895 section 6.5): the substream the client names `client_id`."""

    client_id: str
    resource_id: str
    tag: str | None
    incremental: bool
    input: dict[str, Any] | None


@dataclass(frozen=True)
class UpdateStreamQuery:
    """An `UpdateStreamReq`: substreams to add and client-ids of substreams to remove."""

    add: tuple[AddUpdate, ...]
    remove: tuple[str, ...]


def parse_filtered_cost_map(body: bytes, metrics: Collection[str]) -> FilteredCostMapQuery:
    """A `ReqFilteredCostMap` for a resource offering `metrics`.

    >>> parse_filtered_cost_map(b'{"cost-type": {"cost-mode": "numerical", "cost-metric": "x"},'
    ...                         b' "pids": {"srcs": ["A", "A"], "dsts": []}}', ["x"])
    FilteredCostMapQuery(metric='x', srcs=('A',), dsts=None)
    """
    return filtered_cost_map_query(_request_object(body), metrics)


def filtered_cost_map_query(
    request: dict[str, Any], metrics: Collection[str]
) -> FilteredCostMapQuery:
    """`parse_filtered_cost_map` of a decoded body (also an update stream's `input`)."""
    metric = _cost_metric(request, metrics)
    _refuse_constraints(request)
    pids = _optional(request, "pids", dict, "pids") or {}
    return FilteredCostMapQuery(metric, _pids(pids, "srcs"), _pids(pids, "dsts"))


def parse_endpoint_cost(
    body: bytes, metrics: Collection[str], client: str | None
) -> EndpointCostQuery:
    """A `ReqEndpointCostMap`; a list left out stands for `client`, the requester's address.

    >>> query = parse_endpoint_cost(b'{"cost-type": {"cost-mode": "numerical", "cost-metric":'
    ...     b' "x"}, "endpoints": {"dsts": ["ipv6:2001:DB8::1"]}}', ["x"], "192.0.2.1")
    >>> [(e.text, str(e.address)) for e in query.srcs + query.dsts]
    [('ipv4:192.0.2.1', '192.0.2.1'), ('ipv6:2001:DB8::1', '2001:db8::1')]
    """
    return endpoint_cost_query(_request_object(body), metrics, client)


def endpoint_cost_query(
    request: dict[str, Any], metrics: Collection[str], client: str | None
) -> EndpointCostQuery:
    """`parse_endpoint_cost` of a decoded body (also an update stream's `input`)."""
    metric = _cost_metric(request, metrics)
    _refuse_constraints(request)
    endpoints = _required(request, "endpoints", dict, "endpoints")
    srcs = _endpoints(endpoints, "srcs", client)
    dsts = _endpoints(endpoints, "dsts", client)
    if len(srcs) * len(dsts) > MAX_ENDPOINT_PAIRS:
        pairs = f"{len(srcs)} x {len(dsts)} pairs, more than {MAX_ENDPOINT_PAIRS}"
        raise AltoError(E_INVALID_FIELD_VALUE, "endpoints", pairs)
    return EndpointCostQuery(metric, srcs, dsts)


def parse_update_stream(body: bytes) -> UpdateStreamQuery:
    """An `UpdateStreamReq` (RFC 8895 sections 6.5 and 7.4), for a new stream or its control.

    Which resources exist and whether their `input` is right is the update stream's to check;
    here: the shape, client-ids with a PID's syntax (so never a comma, which separates them
    from the media type in event names), no client-id both added and removed.

    >>> query = parse_update_stream(b'{"add": {"nm": {"resource-id": "networkmap"}}}')
    >>> query.add[0].client_id, query.add[0].incremental, query.remove
    ('nm', True, ())
    """
    request = _request_object(body)
    entries = _optional(request, "add", dict, "add") or {}
    if len(entries) > MAX_SUBSTREAMS:
        too_many = f"{len(entries)} substreams, more than {MAX_SUBSTREAMS}"
        raise AltoError(E_INVALID_FIELD_VALUE, "add", too_many)
    added = tuple(_add_update(client_id, entry) for client_id, entry in entries.items())
    remove = _strings(request, "remove", "remove")
    both = sorted(set(remove) & set(entries))
    if both:
        raise AltoError(E_INVALID_FIELD_VALUE, "remove", both)
    return UpdateStreamQuery(added, remove)


def _add_update(client_id: str, entry: Any) -> AddUpdate:
    field = f"add/{client_id}"
    if not is_valid_pid(client_id):
        syntax = "a client-id has the syntax of a PID name"
        raise AltoError(E_SYNTAX, "add", client_id, syntax_error=syntax)
    if not isinstance(entry, dict):
        raise AltoError(E_INVALID_FIELD_TYPE, field, entry)
    incremental = _optional(entry, "incremental-changes", bool, f"{field}/incremental-changes")
    return AddUpdate(
        client_id,
        _required(entry, "resource-id", str, f"{field}/resource-id"),
        _optional(entry, "tag", str, f"{field}/tag"),
        incremental is not False,
        _optional(entry, "input", dict, f"{field}/input"),
    )


def parse_typed_address(text: str, field: str) -> Endpoint:
    """`ipv4:<dotted quad>` or `ipv6:<RFC 5952 text>` (RFC 7285 section 10.4).

    >>> parse_typed_address("ipv4:192.0.2.1", "endpoints/srcs").address
    IPv4Address('192.0.2.1')
    """
    family, colon, literal = text.partition(":")
    if not colon:
        raise AltoError(E_SYNTAX, field, text, syntax_error="not a typed endpoint address")
    if family not in _ADDRESS_TYPES:
        raise AltoError(E_INVALID_FIELD_VALUE, field, text)
    try:
        address = _ADDRESS_TYPES[family](literal)
    except ValueError:
        address = None
    if address is None or getattr(address, "scope_id", None):
        raise AltoError(E_SYNTAX, field, text, syntax_error=f"not an {family} address")
    return Endpoint(text, address)


def _request_object(body: bytes) -> dict[str, Any]:
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise AltoError(E_SYNTAX, syntax_error=str(error)) from None
    if not isinstance(request, dict):
        raise AltoError(E_SYNTAX, syntax_error="the request is not a JSON object")
    return request


def _cost_metric(request: dict[str, Any], metrics: Collection[str]) -> str:
    """The cost type's metric, which must be one the resource offers in numerical mode."""
    cost_type = _required(request, "cost-type", dict, "cost-type")
    mode: str = _required(cost_type, "cost-mode", str, "cost-type/cost-mode")
    metric: str = _required(cost_type, "cost-metric", str, "cost-type/cost-metric")
    if mode != COST_MODE:
        raise AltoError(E_INVALID_FIELD_VALUE, "cost-type/cost-mode", mode)
    if metric not in metrics:
        raise AltoError(E_INVALID_FIELD_VALUE, "cost-type/cost-metric", metric)
    return metric


def _refuse_constraints(request: dict[str, Any]) -> None:
    """Cost constraints are not offered (the resources' `cost-constraints` is false)."""
    constraints = _optional(request, "constraints", list, "constraints")
    if constraints:
        raise AltoError(E_INVALID_FIELD_VALUE, "constraints", constraints)


def _pids(pids: dict[str, Any], side: str) -> tuple[str, ...] | None:
    names = _strings(pids, side, f"pids/{side}")
    for name in names:
        if not is_valid_pid(name):
            raise AltoError(E_SYNTAX, f"pids/{side}", name, syntax_error="not a valid PID name")
    return names or None


def _endpoints(endpoints: dict[str, Any], side: str, client: str | None) -> tuple[Endpoint, ...]:
    """A side's typed addresses (section 11.5.1.3): `dsts` must list at least one; `srcs` empty
    or left out stands for the requesting client's address."""
    field = f"endpoints/{side}"
    listed = _strings(endpoints, side, field)
    if listed:
        return tuple(parse_typed_address(text, field) for text in listed)
    if side == "dsts":
        if side in endpoints:
            raise AltoError(E_INVALID_FIELD_VALUE, field, [])
        raise AltoError(E_MISSING_FIELD, field)
    try:
        address = ipaddress.ip_address(client or "")
    except ValueError:
        raise AltoError(E_MISSING_FIELD, field) from None
    return (Endpoint(f"ipv{address.version}:{address}", address),)


def _strings(container: dict[str, Any], name: str, field: str) -> tuple[str, ...]:
    """A list of strings, each once in first-seen order (an absent list is empty)."""
    values = _optional(container, name, list, field) or []
    for value in values:
        if not isinstance(value, str):
            raise AltoError(E_INVALID_FIELD_TYPE, field, value)
    return tuple(dict.fromkeys(values))


def _required(container: dict[str, Any], name: str, kind: type, field: str) -> Any:
    if name not in container:
        raise AltoError(E_MISSING_FIELD, field)
    return _optional(container, name, kind, field)


def _optional(container: dict[str, Any], name: str, kind: type, field: str) -> Any:
    if name not in container:
        return None
    value = container[name]
    if not isinstance(value, kind):
        raise AltoError(E_INVALID_FIELD_TYPE, field, value)
    return value
