"""Plain records that parsing produces and link state consumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from service.errors import RejectReason
from service.parse.histogram import HistogramStats


class MeasurementKind(StrEnum):
    """The perfSONAR event types nettel consumes (esmond's names, as on the bus's topics)."""

    DELAY = "histogram-owdelay"
    LOSS = "packet-loss-rate"
    THROUGHPUT = "throughput"
    RETRANSMITS = "packet-retransmits"
    TRACE = "packet-trace"


class TraceHop(NamedTuple):
    """One hop of a traceroute: its TTL, the address that answered ("" when none did), the
    round-trip time (ms, NaN when not given) and the autonomous system (0 when not given)."""

    ttl: int
    address: str
    rtt_ms: float
    asn: int


class Trace(NamedTuple):
    """One traceroute: its hops in TTL order (at most `packet_trace.MAX_HOPS`) and the
    fingerprint of the path, the addresses that answered in order (equal paths, equal prints)."""

    hops: tuple[TraceHop, ...]
    fingerprint: int


class LinkEndpoints(NamedTuple):
    """A directed link: sender and receiver IPs plus the host names the toolkit reported."""

    source: str
    destination: str
    source_host: str
    destination_host: str


class NamedEndpoints(NamedTuple):
    """A directed link as a pScheduler task names its ends: host names (or IPs as text).

    `source`/`destination` hold the address when the task gave an IP or DNS resolved the name,
    else ""; the link index resolves names through the addresses the bus revealed, of family
    `ip_version` (4 or 6; 0 when the task leaves it open).
    """

    source_host: str
    destination_host: str
    source: str = ""
    destination: str = ""
    ip_version: int = 0


@dataclass(slots=True)
class ParsedMessage:
    """One bus message or pScheduler run after parsing: accepted datapoints and the reasons for
    refused ones."""

    kind: MeasurementKind
    link: LinkEndpoints | NamedEndpoints
    delays: list[tuple[int, HistogramStats]] = field(default_factory=list)
    losses: list[tuple[int, float]] = field(default_factory=list)
    #: Throughput results (bits/s), retransmit counts and traceroutes, by epoch second.
    throughputs: list[tuple[int, float]] = field(default_factory=list)
    retransmits: list[tuple[int, int]] = field(default_factory=list)
    traces: list[tuple[int, Trace]] = field(default_factory=list)
    rejected: list[tuple[RejectReason, str]] = field(default_factory=list)
    #: Who sent it where that is not the link's source host: the HTTP client that posted a
    #: pScheduler run (its new links are charged to that client's budget).
    producer: str | None = None

    @property
    def accepted_count(self) -> int:
        return (
            len(self.delays)
            + len(self.losses)
            + len(self.throughputs)
            + len(self.retransmits)
            + len(self.traces)
        )
