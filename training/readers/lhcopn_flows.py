"""Read LHCOPN flow summaries (``/topic/netflow.lhcopn`` bodies) into one series per site pair.

One message::

    {"data": {"src_site": "CERN-PROD", "dst_site": "RAL-LCG2",
              "timestamp": 1509238800, "throughput": 5000000000}}

- Input: JSON lines (one message body per line, as captured from the topic) or a JSON array.
- ``src_site`` / ``dst_site``: non-empty strings; the link key is ``"SRC->DST"``, the series has
  no direction (the pair is directed). Other fields in ``data`` or beside it are not used.
- ``timestamp``: epoch seconds (number or numeric string; milliseconds if >= 1e11, the CERN
  MONIT convention) or ISO 8601 (UTC when it has no offset). It is taken as the start of the
  summary window of ``period_s`` seconds.
- ``throughput``: bits/s, a non-negative number (null means unknown -> NaN).
- Capacity: ``capacities[(src, dst)]`` (directed) or else ``default_capacity_bps``; a pair with
  neither is refused.
- A message repeating a pair and timestamp (a re-delivery) counts once: the first is kept.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from training.readers.errors import RouterDataError
from training.readers.fields import check_capacity, parse_epoch, parse_rate
from training.readers.series import UtilisationSeries, build_series
from training.readers.sources import as_text, load_json_documents, parse_file

SitePair = tuple[str, str]


def parse_lhcopn_flows(
    data: str | bytes,
    capacities: Mapping[SitePair, float] | None = None,
    default_capacity_bps: float | None = None,
    period_s: int = 60,
) -> list[UtilisationSeries]:
    """Return one series per (src_site, dst_site) pair, in order of first appearance."""
    samples: dict[SitePair, list[tuple[int, float]]] = defaultdict(list)
    for where, message in load_json_documents(as_text(data)):
        pair, timestamp, throughput = _parse_message(message, where)
        samples[pair].append((timestamp, throughput))
    return [
        _pair_series(pair, found, _capacity(pair, capacities, default_capacity_bps), period_s)
        for pair, found in samples.items()
    ]


def read_lhcopn_flows_file(
    path: str | Path,
    capacities: Mapping[SitePair, float] | None = None,
    default_capacity_bps: float | None = None,
    period_s: int = 60,
) -> list[UtilisationSeries]:
    """``parse_lhcopn_flows`` on a file."""
    return parse_file(
        path,
        parse_lhcopn_flows,
        capacities=capacities,
        default_capacity_bps=default_capacity_bps,
        period_s=period_s,
    )


def _parse_message(message: dict[str, Any], where: str) -> tuple[SitePair, int, float]:
    data = message.get("data")
    if not isinstance(data, dict):
        raise RouterDataError(f"{where}: 'data' must be a JSON object")
    pair = (_site(data, "src_site", where), _site(data, "dst_site", where))
    timestamp = parse_epoch(_field(data, "timestamp", where), f"{where}: data.timestamp")
    throughput = parse_rate(_field(data, "throughput", where), f"{where}: data.throughput")
    return pair, timestamp, throughput


def _field(data: dict[str, Any], name: str, where: str) -> Any:
    if name not in data:
        raise RouterDataError(f"{where}: missing field data.{name}")
    return data[name]


def _site(data: dict[str, Any], name: str, where: str) -> str:
    value = _field(data, name, where)
    if not isinstance(value, str) or not value.strip():
        raise RouterDataError(f"{where}: data.{name} must be a non-empty string, not {value!r}")
    return value.strip()


def _capacity(
    pair: SitePair, capacities: Mapping[SitePair, float] | None, default: float | None
) -> float:
    if capacities is not None and pair in capacities:
        return check_capacity(capacities[pair], f"capacity of {pair[0]}->{pair[1]}")
    if default is None:
        raise RouterDataError(f"no capacity for {pair[0]}->{pair[1]} and no default capacity")
    return check_capacity(default, "default capacity")


def _pair_series(
    pair: SitePair, samples: list[tuple[int, float]], capacity: float, period_s: int
) -> UtilisationSeries:
    utilisation = [(timestamp, throughput / capacity) for timestamp, throughput in samples]
    return build_series(f"{pair[0]}->{pair[1]}", None, utilisation, period_s)
