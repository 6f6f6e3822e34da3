"""Plain-tuple forms of parse requests and results, for handing them to and from parser processes.

Pickling the records themselves costs several microseconds per message on the receiving side
(dataclass state, enum lookups); tuples of builtins cost a fraction of that, and the receiver
rebuilds the records with the named tuples' fast constructors.
"""

from __future__ import annotations

from typing import Any

from service.errors import RejectedInput, RejectReason
from service.parse.histogram import HistogramStats
from service.parse.perfsonar import ParseInput, ParseResult
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage, Trace, TraceHop

WireRequest = tuple[bytes, list[bytes | str]]
WireResult = tuple[Any, ...]

_KINDS = tuple(MeasurementKind)
_KIND_CODES = {kind: code for code, kind in enumerate(_KINDS)}


def encode_request(frames: ParseInput) -> WireRequest:
    """One byte per frame for its kind, and the bodies as they are."""
    return bytes(_KIND_CODES[kind] for kind, _ in frames), [body for _, body in frames]


def decode_request(request: WireRequest) -> list[tuple[MeasurementKind, bytes | str]]:
    kinds, bodies = request
    return [(_KINDS[code], body) for code, body in zip(kinds, bodies, strict=True)]


def encode_results(results: list[ParseResult]) -> list[WireResult]:
    """Each result as a tuple of builtins: 2 fields for a rejection, 8 for a parsed message."""
    return [_encode(result) for result in results]


def decode_results(wire: list[WireResult]) -> list[ParseResult]:
    """Inverse of `encode_results`."""
    return [_decode(item) for item in wire]


def _encode(result: ParseResult) -> WireResult:
    if isinstance(result, RejectedInput):
        return (result.reason.value, result.detail)
    return (
        _KIND_CODES[result.kind],
        tuple(result.link),
        [(ts, tuple(stats)) for ts, stats in result.delays],
        result.losses,
        [(reason.value, detail) for reason, detail in result.rejected],
        result.throughputs,
        result.retransmits,
        [(ts, list(map(tuple, trace.hops)), trace.fingerprint) for ts, trace in result.traces],
    )


def _decode(item: WireResult) -> ParseResult:
    if len(item) == 2:
        return RejectedInput(RejectReason(item[0]), item[1])
    kind, link, delays, losses, rejected, throughputs, retransmits, traces = item
    stats, hop = HistogramStats._make, TraceHop._make
    return ParsedMessage(
        kind=_KINDS[kind],
        link=LinkEndpoints._make(link),
        delays=[(ts, stats(values)) for ts, values in delays],
        losses=losses,
        rejected=[(RejectReason(reason), detail) for reason, detail in rejected],
        throughputs=throughputs,
        retransmits=retransmits,
        traces=[(ts, Trace(tuple(map(hop, hops)), digest)) for ts, hops, digest in traces],
    )
