"""Read raw SNMP interface counters into in and out utilisation series per interface.

Layout: CSV with a header naming at least ``timestamp,interface,ifHCInOctets,ifHCOutOctets``
(any column order; other columns ignored), optionally ``ifSpeed`` (bits/s) and ``ifHighSpeed``
(Mb/s)::

    timestamp,interface,ifHCInOctets,ifHCOutOctets,ifSpeed
    1509238800,TenGigE0/1/0/3,1000,2000,10000000000

- ``timestamp``: epoch seconds (milliseconds if >= 1e11) or ISO 8601 (UTC without offset).
- Octet counters: decimal integers in ``[0, 2**64)``.
- Link speed, first found: ``if_speeds[interface]`` from the caller, the row's ``ifHighSpeed``
  x 10**6, the row's ``ifSpeed``. An ``ifSpeed`` of 4294967295 is the 32-bit ceiling that
  interfaces faster than 4.29 Gb/s report and is refused (give ``ifHighSpeed`` or ``if_speeds``).
- Rows of one interface are taken in file order; a row whose timestamp is not after that
  interface's previous kept row (a duplicate or out-of-order poll) is skipped.
- For consecutive kept polls at t0 < t1 the utilisation of the interval starting at t0 is
  ``delta octets x 8 / (t1 - t0) / speed``, using the speed of the t1 row. A negative delta is a
  64-bit wrap (``+ 2**64``); if the wrapped delta implies more than 1.5 x speed the counter
  was reset (device reboot) and the interval is NaN.
- Series ``period_s`` is the median poll spacing; an interface with fewer than two kept polls
  has no interval and no series.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from training.readers.errors import RouterDataError
from training.readers.fields import check_capacity, parse_epoch, parse_rate
from training.readers.series import Direction, UtilisationSeries, build_series
from training.readers.sources import as_text, parse_file

COUNTER_MODULUS = 2**64
RESET_UTILISATION = 1.5
IF_SPEED_CEILING = 2**32 - 1
REQUIRED_COLUMNS = ("timestamp", "interface", "ifHCInOctets", "ifHCOutOctets")


@dataclass(frozen=True, slots=True)
class _Poll:
    timestamp: int
    in_octets: int
    out_octets: int
    speed_bps: float


def parse_snmp_counters(
    data: str | bytes, if_speeds: Mapping[str, float] | None = None
) -> list[UtilisationSeries]:
    """Return ``[in, out]`` series for each interface, in order of first appearance."""
    series: list[UtilisationSeries] = []
    for interface, polls in _read_polls(as_text(data), if_speeds or {}).items():
        kept = _increasing(polls)
        if len(kept) >= 2:
            series += [_series(interface, "in", kept), _series(interface, "out", kept)]
    return series


def read_snmp_counters_file(
    path: str | Path, if_speeds: Mapping[str, float] | None = None
) -> list[UtilisationSeries]:
    """``parse_snmp_counters`` on a file."""
    return parse_file(path, parse_snmp_counters, if_speeds=if_speeds)


def _read_polls(text: str, if_speeds: Mapping[str, float]) -> dict[str, list[_Poll]]:
    reader = csv.reader(io.StringIO(text))
    columns = _header(next(reader, None))
    polls: dict[str, list[_Poll]] = defaultdict(list)
    for row in reader:
        if any(cell.strip() for cell in row):
            interface, poll = _parse_row(row, columns, if_speeds, f"line {reader.line_num}")
            polls[interface].append(poll)
    if not polls:
        raise RouterDataError("no counter rows after the header")
    return polls


def _header(row: list[str] | None) -> dict[str, int]:
    columns = {name.strip(): index for index, name in enumerate(row or [])}
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    if missing:
        raise RouterDataError(f"line 1: header lacks column(s) {', '.join(missing)}")
    return columns


def _parse_row(
    row: list[str], columns: dict[str, int], if_speeds: Mapping[str, float], where: str
) -> tuple[str, _Poll]:
    if len(row) != len(columns):
        raise RouterDataError(f"{where}: {len(row)} fields, the header has {len(columns)}")
    cells = {name: row[index].strip() for name, index in columns.items()}
    interface = cells["interface"]
    if not interface:
        raise RouterDataError(f"{where}: empty interface")
    return interface, _Poll(
        timestamp=parse_epoch(cells["timestamp"], f"{where}: timestamp"),
        in_octets=_counter(cells["ifHCInOctets"], f"{where}: ifHCInOctets"),
        out_octets=_counter(cells["ifHCOutOctets"], f"{where}: ifHCOutOctets"),
        speed_bps=_speed(interface, cells, if_speeds, where),
    )


def _counter(text: str, where: str) -> int:
    if not text.isdigit() or int(text) >= COUNTER_MODULUS:
        raise RouterDataError(f"{where}: {text!r} is not a 64-bit counter value")
    return int(text)


def _speed(
    interface: str, cells: dict[str, str], if_speeds: Mapping[str, float], where: str
) -> float:
    if interface in if_speeds:
        return check_capacity(if_speeds[interface], f"if_speeds[{interface!r}]")
    if cells.get("ifHighSpeed"):
        megabits = parse_rate(cells["ifHighSpeed"], f"{where}: ifHighSpeed")
        return check_capacity(megabits * 1e6, f"{where}: ifHighSpeed")
    if not cells.get("ifSpeed"):
        raise RouterDataError(f"{where}: no speed for {interface!r} (no ifSpeed, no if_speeds)")
    speed = parse_rate(cells["ifSpeed"], f"{where}: ifSpeed")
    if speed == IF_SPEED_CEILING:
        raise RouterDataError(f"{where}: ifSpeed is the 32-bit ceiling; give the real speed")
    return check_capacity(speed, f"{where}: ifSpeed")


def _increasing(polls: list[_Poll]) -> list[_Poll]:
    """Polls in file order, skipping any not later than the last one kept."""
    kept: list[_Poll] = []
    for poll in polls:
        if not kept or poll.timestamp > kept[-1].timestamp:
            kept.append(poll)
    return kept


def _series(interface: str, direction: Direction, polls: list[_Poll]) -> UtilisationSeries:
    intervals = list(pairwise(polls))
    samples = [(a.timestamp, _utilisation(a, b, direction)) for a, b in intervals]
    period = round(statistics.median(b.timestamp - a.timestamp for a, b in intervals))
    return build_series(interface, direction, samples, period)


def _utilisation(before: _Poll, after: _Poll, direction: Direction) -> float:
    """Average utilisation between two polls; NaN when the counter was reset in between."""
    delta = _octets(after, direction) - _octets(before, direction)
    wrapped = delta < 0
    if wrapped:
        delta += COUNTER_MODULUS
    utilisation = delta * 8 / (after.timestamp - before.timestamp) / after.speed_bps
    return math.nan if wrapped and utilisation > RESET_UTILISATION else utilisation


def _octets(poll: _Poll, direction: Direction) -> int:
    return poll.in_octets if direction == "in" else poll.out_octets
