"""Traceroutes, in the two forms perfSONAR writes them, read into `Trace` records.

- esmond's `packet-trace` event type (the bus's version-1 layout, and the archive API): a list of
  hop objects `{"ttl", "query", "success", "ip", "hostname", "rtt" (ms), "mtu", "as",
  "error-message"}`, as pScheduler's esmond archiver formats a trace run's first path (one
  query per TTL; older toolkits listed up to three queries per TTL: the first is taken, as
  OSG's collector does). A hop that did not answer has no `ip`.
- pScheduler's `trace` test result (tools traceroute, tracepath, paris-traceroute), as its
  `http` archiver sends the run and as the bus's version-2 (push) layout carries it: `paths`, a
  list of paths, each a list of hop objects `{"ip", "hostname", "rtt" (ISO 8601 duration, e.g.
  "PT0.0015S"), "as" ({"number", "owner"}), "error", "mtu"}` in TTL order from the spec's
  `first-ttl` (1 by default); `{}` is a hop that did not answer. The first path is taken, as
  esmond's archiver and perfSONAR's Logstash pipeline do.

A path is what answered: the fingerprint covers the answering addresses in TTL order (as
perfSONAR's Logstash fingerprints the hop IPs), so a hop that stays silent on one run and
answers on the next changes nothing but that hop.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from service.errors import RejectedInput, RejectReason
from service.parse.addresses import canonical_ip
from service.parse.json_fields import check_length
from service.parse.limits import InputLimits
from service.parse.records import Trace, TraceHop

#: The highest TTL kept: the path state's hop columns. pScheduler's trace tools stop at 30
#: hops unless the spec's `hops` says otherwise.
MAX_HOPS = 32
#: Most hop objects read from one esmond list (up to three queries per TTL).
MAX_HOP_OBJECTS = 4 * MAX_HOPS
#: The longest round-trip time taken (ms): a minute.
MAX_RTT_MS = 60_000.0
#: Largest autonomous system number (32 bits).
MAX_ASN = (1 << 32) - 1
#: An ISO 8601 duration of days, hours, minutes and seconds, as pScheduler writes RTTs.
_DURATION = re.compile(
    r"P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?"
)
_DURATION_SECONDS = (86_400.0, 3600.0, 60.0, 1.0)


def read_trace(value: Any, limits: InputLimits) -> Trace:
    """A trace from a bus datapoint's value: esmond's hop list, or pScheduler's `paths`.

    >>> trace = read_trace([{"ttl": 1, "query": 1, "ip": "192.0.2.1", "rtt": 0.41},
    ...     {"ttl": 2, "query": 1}, {"ttl": 3, "query": 1, "ip": "198.51.100.20",
    ...     "as": {"number": 64500}}], InputLimits())
    >>> [(hop.ttl, hop.address, hop.asn) for hop in trace.hops]
    [(1, '192.0.2.1', 0), (2, '', 0), (3, '198.51.100.20', 64500)]
    """
    if not isinstance(value, list):
        raise RejectedInput(RejectReason.BAD_VALUE, "packet-trace is not a list")
    if value and isinstance(value[0], list):
        return read_paths(value, 1, limits)
    return _esmond_hops(value, limits)


def read_paths(paths: Any, first_ttl: int, limits: InputLimits) -> Trace:
    """The first path of a pScheduler trace result's `paths`, its first hop at `first_ttl`."""
    if not isinstance(paths, list):
        raise RejectedInput(RejectReason.BAD_VALUE, "paths is not a list")
    if not paths:
        raise RejectedInput(RejectReason.EMPTY, "no path")
    path = paths[0]
    if not isinstance(path, list):
        raise RejectedInput(RejectReason.BAD_VALUE, "a path is not a list")
    if first_ttl + len(path) - 1 > MAX_HOPS:
        raise RejectedInput(RejectReason.TOO_MANY_HOPS, f"{len(path)} hops from TTL {first_ttl}")
    hops = []
    for offset, hop in enumerate(path):
        if not isinstance(hop, dict):
            raise RejectedInput(RejectReason.BAD_VALUE, f"hop {offset + 1} is not an object")
        rtt = hop.get("rtt")
        rtt_ms = math.nan if rtt is None else _duration_ms(rtt, limits)
        hops.append(_hop(first_ttl + offset, hop, rtt_ms, limits))
    return _trace(hops)


def _esmond_hops(items: list[Any], limits: InputLimits) -> Trace:
    if len(items) > MAX_HOP_OBJECTS:
        raise RejectedInput(RejectReason.TOO_LARGE, f"{len(items)} hop objects")
    by_ttl: dict[int, TraceHop] = {}
    for item in items:
        if not isinstance(item, dict):
            raise RejectedInput(RejectReason.BAD_VALUE, "a hop is not an object")
        ttl = item.get("ttl")
        if type(ttl) is not int or not 1 <= ttl <= 255:  # integers as they come go straight
            ttl = _whole(ttl, "hop ttl", 1, 255, limits)
        query = item.get("query", 1)
        if type(query) is not int or query != 1:
            query = _whole(query, "hop query", 1, 255, limits)
        if query != 1 or ttl in by_ttl:
            continue
        if ttl > MAX_HOPS:
            raise RejectedInput(RejectReason.TOO_MANY_HOPS, f"a hop at TTL {ttl}")
        by_ttl[ttl] = _hop(ttl, item, _milliseconds(item.get("rtt"), limits), limits)
    return _trace([by_ttl[ttl] for ttl in sorted(by_ttl)])


def _hop(ttl: int, hop: dict[str, Any], rtt_ms: float, limits: InputLimits) -> TraceHop:
    """A hop object's address (if it answered) and AS, at `ttl` with `rtt_ms`."""
    ip = hop.get("ip")
    if ip is None:  # no answer: whatever else the hop says has no address to belong to
        return TraceHop(ttl, "", math.nan, 0)
    if not isinstance(ip, str) or len(ip) > limits.max_string_length:
        raise RejectedInput(RejectReason.BAD_VALUE, f"hop {ttl}: ip is not a string")
    address = canonical_ip(ip)
    if address is None:
        raise RejectedInput(RejectReason.BAD_VALUE, f"hop {ttl}: ip is not an IP address")
    return TraceHop(ttl, address, rtt_ms, _asn(hop.get("as"), ttl, limits))


def _trace(hops: list[TraceHop]) -> Trace:
    answered = [hop.address for hop in hops if hop.address]
    if not answered:
        raise RejectedInput(RejectReason.EMPTY, "no hop answered")
    return Trace(tuple(hops), path_fingerprint(answered))


def path_fingerprint(addresses: list[str]) -> int:
    """A signed 64-bit digest of the answering addresses in order (BLAKE2b).

    >>> path_fingerprint(["192.0.2.1", "198.51.100.20"]) == path_fingerprint(["192.0.2.1"])
    False
    """
    digest = hashlib.blake2b(",".join(addresses).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _asn(value: Any, ttl: int, limits: InputLimits) -> int:
    """The AS number of `as`: a number, or esmond's and pScheduler's `{"number", "owner"}`."""
    if value is None:
        return 0
    if isinstance(value, dict):
        value = value.get("number")
        if value is None:
            return 0
    if type(value) is int and 0 <= value <= MAX_ASN:
        return value
    return _whole(value, f"hop {ttl}: as", 0, MAX_ASN, limits)


def _milliseconds(value: Any, limits: InputLimits) -> float:
    """esmond's RTT: milliseconds as a number or numeric string, 0 .. MAX_RTT_MS (NaN when
    absent)."""
    if value is None:
        return math.nan
    if type(value) is float or type(value) is int:
        return _checked_rtt(float(value))
    if isinstance(value, str):
        check_length(value, "hop rtt", limits)
        try:
            value = float(value)
        except ValueError:
            raise RejectedInput(RejectReason.BAD_VALUE, "hop rtt is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RejectedInput(RejectReason.BAD_VALUE, "hop rtt is not a number")
    return _checked_rtt(float(value))


def _duration_ms(value: Any, limits: InputLimits) -> float:
    """pScheduler's RTT: an ISO 8601 duration (`PT0.0015S`, or `P0D` for zero), in ms."""
    if not isinstance(value, str):
        raise RejectedInput(RejectReason.BAD_VALUE, "hop rtt is not an ISO 8601 duration")
    check_length(value, "hop rtt", limits)
    match = _DURATION.fullmatch(value)
    if match is None or value in ("P", "PT") or value.endswith("T"):
        raise RejectedInput(RejectReason.BAD_VALUE, "hop rtt is not an ISO 8601 duration")
    seconds = sum(
        float(part) * unit
        for part, unit in zip(match.groups(), _DURATION_SECONDS, strict=True)
        if part is not None
    )
    return _checked_rtt(seconds * 1000.0)


def _checked_rtt(milliseconds: float) -> float:
    if not 0.0 <= milliseconds <= MAX_RTT_MS:  # NaN fails it too
        raise RejectedInput(RejectReason.BAD_VALUE, "hop rtt out of range")
    return milliseconds


def _whole(value: Any, what: str, low: int, high: int, limits: InputLimits) -> int:
    """A whole number in low .. high, given as a JSON integer or its text."""
    if value is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, what)
    if isinstance(value, str):
        check_length(value, what, limits)
        text = value.strip()
        value = int(text) if text.isascii() and text.isdigit() else None
    if type(value) is not int or not low <= value <= high:
        raise RejectedInput(RejectReason.BAD_VALUE, f"{what} is not a whole number {low}..{high}")
    return value
