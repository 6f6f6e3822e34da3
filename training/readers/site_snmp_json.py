"""Read WLCG site SNMP JSON snapshots (one per minute) into in and out series per site.

One document::

    {"Description": "CERN-PROD LHCOPN", "UpdatedLast": 1509238800,
     "InBytesPerSec": 625000000, "OutBytesPerSec": 312500000,
     "UpdateInterval": "60 seconds", "MonitoredInterfaces": ["rt1.cern.ch:TenGigE0/1/0/3"]}

- Input: a JSON array of documents, or JSON lines (one document per line).
- ``Description`` (non-empty string) is the link key; all documents of one input must share it
  (one site, one capacity). ``MonitoredInterfaces`` and any other field are not used.
- ``UpdatedLast``: epoch seconds (number or numeric string, milliseconds if >= 1e11) or
  ISO 8601 (UTC when it has no offset).
- ``InBytesPerSec`` / ``OutBytesPerSec``: non-negative numbers (null means unknown -> NaN);
  utilisation = bytes/s x 8 / capacity.
- ``UpdateInterval``: ``"<n> seconds"``, ``"<n> minutes"`` or a number of seconds. The rates
  are taken as averages over the interval that *ends* at ``UpdatedLast``, so a sample's
  timestamp (an interval start) is ``UpdatedLast - UpdateInterval``.
- A snapshot repeated with the same ``UpdatedLast`` (the site had not updated yet) counts once:
  the first one read is kept.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.readers.errors import RouterDataError
from training.readers.fields import check_capacity, parse_epoch, parse_rate
from training.readers.series import UtilisationSeries, build_series
from training.readers.sources import as_text, load_json_documents, parse_file

_INTERVAL = re.compile(r"(\d+)\s*(s|secs?|seconds?|min|mins|minutes?)?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    description: str
    start: int
    interval_s: int
    in_bytes_per_s: float
    out_bytes_per_s: float


def parse_site_snmp_json(data: str | bytes, capacity_bps: float) -> list[UtilisationSeries]:
    """Return the site's ``[in, out]`` series; utilisation = bytes/s x 8 / ``capacity_bps``."""
    capacity = check_capacity(capacity_bps)
    snapshots: list[_Snapshot] = []
    for where, document in load_json_documents(as_text(data)):
        snapshot = _parse_snapshot(document, where)
        if snapshots and snapshot.description != snapshots[0].description:
            raise RouterDataError(
                f"{where}: Description {snapshot.description!r} is not "
                f"{snapshots[0].description!r}; give one site per input"
            )
        snapshots.append(snapshot)
    return _site_series(snapshots, capacity)


def read_site_snmp_json_file(path: str | Path, capacity_bps: float) -> list[UtilisationSeries]:
    """``parse_site_snmp_json`` on a file."""
    return parse_file(path, parse_site_snmp_json, capacity_bps=capacity_bps)


def _parse_snapshot(document: dict[str, Any], where: str) -> _Snapshot:
    interval = _parse_interval(_required(document, "UpdateInterval", where), where)
    updated = parse_epoch(_required(document, "UpdatedLast", where), f"{where}: UpdatedLast")
    return _Snapshot(
        description=_parse_description(_required(document, "Description", where), where),
        start=updated - interval,
        interval_s=interval,
        in_bytes_per_s=_rate(document, "InBytesPerSec", where),
        out_bytes_per_s=_rate(document, "OutBytesPerSec", where),
    )


def _required(document: dict[str, Any], name: str, where: str) -> Any:
    if name not in document:
        raise RouterDataError(f"{where}: missing field {name!r}")
    return document[name]


def _rate(document: dict[str, Any], name: str, where: str) -> float:
    return parse_rate(_required(document, name, where), f"{where}: {name}")


def _parse_description(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RouterDataError(f"{where}: Description must be a non-empty string, not {value!r}")
    return value.strip()


def _parse_interval(value: Any, where: str) -> int:
    """Seconds from ``"60 seconds"``, ``"5 minutes"`` or a positive integer number."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = _INTERVAL.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None or int(match[1]) == 0:
        raise RouterDataError(f"{where}: UpdateInterval {value!r} is not '<n> seconds'")
    unit = (match[2] or "s").lower()
    return int(match[1]) * (60 if unit.startswith("m") else 1)


def _site_series(group: list[_Snapshot], capacity: float) -> list[UtilisationSeries]:
    link = group[0].description
    period = round(statistics.median(s.interval_s for s in group))
    in_samples = [(s.start, s.in_bytes_per_s * 8 / capacity) for s in group]
    out_samples = [(s.start, s.out_bytes_per_s * 8 / capacity) for s in group]
    return [
        build_series(link, "in", in_samples, period),
        build_series(link, "out", out_samples, period),
    ]
