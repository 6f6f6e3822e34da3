"""OSG/ATLAS archive documents (``ps_owd``, ``ps_packetloss``) as the records the bus parser makes.

The OSG/ATLAS collector wrote one Elasticsearch document per link and minute; exports of those
indices (JSON, JSON lines, Parquet) are the archive that retraining reads. A document::

    {"src": "192.41.236.31", "dest": "129.79.53.24", "src_host": "psl.cern.ch",
     "dest_host": "ps.iu.edu", "timestamp": 1700000040000,
     "delay_mean": 71.3, "delay_sd": 0.4, "delay_median": 71.2}        # ps_owd
    {..., "packet_loss": 0.0017}                                      # ps_packetloss

An Elasticsearch hit (``{"_index": ..., "_source": {...}}``) is read through its ``_source``.
``convert_document`` turns one document into ``ParsedMessage`` records (what
``service.parse.perfsonar.parse_message`` makes of a bus message), so the replay treats both
archives alike; a document the service would refuse raises ``RejectedInput`` with the serving
reason (``service.errors.RejectReason``).

What a document cannot give: it has no histogram, so of the service's ``HistogramStats`` only
``mean``, ``std`` (``delay_sd``) and ``median`` are known. ``packets`` is 0 and
``dropped_packets`` 0 (not known; nothing in state or analysis reads them), ``minimum`` and
``p95`` are NaN (the matrix's per-link ``delay_min``/``delay_p95`` stay empty for such links),
``clock_suspect`` is set only when the mean or median is negative (a negative delay was kept),
which misses a histogram with a few negative buckets. None of the 50 features reads a missing
field: they use the mean, median and std series and the loss, and the all-time minimum is the
minimum of the minute means. The collector's median is approximate (a precedence bug for even
packet counts), so ``delay_median_smoothed`` inherits that error on these archives. Clock errors
cannot be dropped packet by packet: a document whose mean lies outside the service's plausible
delays ([-1000, 50000] ms) is refused as ``clock_error``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from service.errors import RejectedInput, RejectReason
from service.parse.addresses import canonical_ip
from service.parse.histogram import CLOCK_ERROR_HIGH_MS, CLOCK_ERROR_LOW_MS, HistogramStats
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage

#: Fields of a document that this reader uses (exports hold more: sites, MA, ipv6, ...).
IDENTITY_FIELDS = ("src", "dest", "src_host", "dest_host", "timestamp")
DELAY_FIELDS = ("delay_mean", "delay_sd", "delay_median")
LOSS_FIELD = "packet_loss"
DOCUMENT_FIELDS = (*IDENTITY_FIELDS, *DELAY_FIELDS, LOSS_FIELD)
#: Epoch milliseconds beyond this (year 5138) are not timestamps.
_MAX_EPOCH_MS = 1e14
_MAX_STRING = 255


def looks_like_document(value: Any) -> bool:
    """Whether `value` is shaped like an archive document (or a hit holding one), not a bus
    capture line; used to tell the two JSON-lines layouts apart.

    >>> looks_like_document({"_source": {"src": "10.0.0.1"}}), looks_like_document({"body": {}})
    (True, False)
    """
    if not isinstance(value, dict):
        return False
    source = value.get("_source", value)
    return isinstance(source, dict) and "src" in source and "body" not in value


def convert_document(document: Any) -> list[ParsedMessage]:
    """The delay and/or loss record of one ``ps_owd``/``ps_packetloss`` document.

    Raises RejectedInput (serving's reasons) for a document the service would refuse.

    >>> [m] = convert_document({"src": "10.0.0.1", "dest": "10.0.0.2", "timestamp": 60500,
    ...     "packet_loss": 0.25})
    >>> m.kind.value, m.link.source_host, m.losses
    ('packet-loss-rate', '10.0.0.1', [(60, 0.25)])
    """
    if isinstance(document, dict) and isinstance(document.get("_source"), dict):
        document = document["_source"]
    if not isinstance(document, dict):
        raise RejectedInput(RejectReason.NOT_AN_OBJECT, type(document).__name__)
    has_delay = _present(document, "delay_mean")
    has_loss = _present(document, LOSS_FIELD)
    if not (has_delay or has_loss):
        raise RejectedInput(RejectReason.MISSING_FIELD, "delay_mean or packet_loss")
    link = _link(document)
    ts = _timestamp_seconds(document.get("timestamp"))
    messages = []
    if has_delay:
        messages.append(ParsedMessage(MeasurementKind.DELAY, link, delays=[(ts, _delay(document))]))
    if has_loss:
        loss = _loss(document[LOSS_FIELD])
        messages.append(ParsedMessage(MeasurementKind.LOSS, link, losses=[(ts, loss)]))
    return messages


def _present(document: dict[str, Any], name: str) -> bool:
    value = document.get(name)
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _link(document: dict[str, Any]) -> LinkEndpoints:
    source, destination = _ip(document, "src"), _ip(document, "dest")
    hosts = _host(document, "src_host", source), _host(document, "dest_host", destination)
    return LinkEndpoints(source, destination, *hosts)


def _ip(document: dict[str, Any], name: str) -> str:
    value = document.get(name)
    if value is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, name)
    if not isinstance(value, str) or len(value) > _MAX_STRING:
        raise RejectedInput(RejectReason.BAD_VALUE, f"{name} is not a string")
    canonical = canonical_ip(value)
    if canonical is None:
        raise RejectedInput(RejectReason.BAD_VALUE, f"{name} is not an IP address")
    return canonical


def _host(document: dict[str, Any], name: str, fallback: str) -> str:
    value = document.get(name)
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return fallback
    if not isinstance(value, str) or len(value) > _MAX_STRING:
        raise RejectedInput(RejectReason.BAD_VALUE, f"{name} is not a short string")
    return value


def _timestamp_seconds(value: Any) -> int:
    """Epoch seconds of the document's `timestamp`: epoch ms (number or numeric text), or a
    date-time (Parquet timestamp column; ISO 8601 text; UTC when naive)."""
    if value is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, "timestamp")
    if isinstance(value, datetime):
        return math.floor(_utc(value).timestamp())
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return _iso_seconds(value)
    milliseconds = _number(value, "timestamp")
    if not 0 <= milliseconds < _MAX_EPOCH_MS:
        raise RejectedInput(RejectReason.BAD_VALUE, "timestamp out of range")
    return math.floor(milliseconds / 1000.0)


def _iso_seconds(text: str) -> int:
    try:
        return math.floor(_utc(datetime.fromisoformat(text.strip())).timestamp())
    except ValueError:
        raise RejectedInput(RejectReason.BAD_VALUE, "timestamp is not a time") from None


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _number(value: Any, name: str) -> float:
    if isinstance(value, str) and len(value) <= _MAX_STRING:
        try:
            value = float(value)
        except ValueError:
            raise RejectedInput(RejectReason.BAD_VALUE, f"{name} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RejectedInput(RejectReason.BAD_VALUE, f"{name} is not a number")
    if not math.isfinite(value):
        raise RejectedInput(RejectReason.BAD_VALUE, f"{name} is not finite")
    return float(value)


def _delay(document: dict[str, Any]) -> HistogramStats:
    mean = _number(document["delay_mean"], "delay_mean")
    if not CLOCK_ERROR_LOW_MS < mean < CLOCK_ERROR_HIGH_MS:
        raise RejectedInput(RejectReason.CLOCK_ERROR, f"delay_mean {mean} ms")
    for name in ("delay_sd", "delay_median"):
        if not _present(document, name):
            raise RejectedInput(RejectReason.MISSING_FIELD, name)
    std = _number(document["delay_sd"], "delay_sd")
    median = _number(document["delay_median"], "delay_median")
    if std < 0:
        raise RejectedInput(RejectReason.BAD_VALUE, "delay_sd is negative")
    if not CLOCK_ERROR_LOW_MS < median < CLOCK_ERROR_HIGH_MS:
        raise RejectedInput(RejectReason.CLOCK_ERROR, f"delay_median {median} ms")
    suspect = mean < 0 or median < 0
    return HistogramStats(0, mean, std, median, math.nan, math.nan, suspect, 0)


def _loss(value: Any) -> float:
    loss = _number(value, "packet_loss")
    if not 0.0 <= loss <= 1.0:
        raise RejectedInput(RejectReason.LOSS_OUT_OF_RANGE, repr(value)[:40])
    return loss
