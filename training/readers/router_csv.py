"""Read netTel's router-statistics CSV export (one router interface) into in and out series.

Layout::

    Router: rt1.cern.ch - TenGigE0/1/0/3 (LHCOPN RAL)
    Bits In - Average Rate (Bits Per Second)
    10/29/17 02:50,5000000000
    10/29/17 02:55,2500000000
    Bits Out - Average Rate (Bits Per Second)
    10/29/17 02:50,1000000000
    ...

- The text after ``Router:`` is the link key. Other lines before the first section header
  (report titles) are ignored; blank lines are skipped; header lines may be quoted or end in
  commas.
- Inside a section every line is a row ``MM/DD/YY HH:MM,<bits/s>`` (CSV quoting allowed);
  an empty value means unknown (NaN). Rows must be in chronological order.
- Row times are wall-clock times in ``timezone`` (default Europe/Zurich). Daylight saving:
  a time in the spring-forward gap (02:00-02:59 on the last Sunday of March) does not exist and
  is refused. A time in the repeated autumn hour is ambiguous; it is read as the earliest
  instant after the previous row, so an export that lists the hour twice reads as summer time
  then winter time. If the hour is listed once, or opens the section, it is read as summer time.
- Each row is a 5-minute average. By default the row time marks the *end* of that interval
  (the poll time, as RRD-based pollers label their rows), so the series timestamp, which is an
  interval start, is the row time minus ``interval_s``; pass ``row_time="start"`` for exports
  that label intervals by their start.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from training.readers.errors import RouterDataError
from training.readers.fields import check_capacity, parse_rate
from training.readers.series import Direction, UtilisationSeries, build_series
from training.readers.sources import as_text, parse_file

ROUTER_PREFIX = "Router:"
SECTION_HEADERS: dict[str, Direction] = {
    "Bits In - Average Rate (Bits Per Second)": "in",
    "Bits Out - Average Rate (Bits Per Second)": "out",
}
ROW_TIME_FORMAT = "%m/%d/%y %H:%M"
RowTime = Literal["start", "end"]


@dataclass
class _Export:
    """The export split into its router name and the numbered row lines of each section."""

    link: str | None = None
    sections: dict[Direction, list[tuple[int, str]]] = field(default_factory=dict)


def parse_router_csv(
    data: str | bytes,
    capacity_bps: float,
    timezone: str = "Europe/Zurich",
    row_time: RowTime = "end",
    interval_s: int = 300,
) -> list[UtilisationSeries]:
    """Return the ``[in, out]`` utilisation series of one router CSV export.

    Utilisation is the row's bits/s divided by ``capacity_bps``.
    """
    capacity = check_capacity(capacity_bps)
    zone = _zone(timezone)
    shift = _row_time_shift(row_time, interval_s)
    link, sections = _complete(_split(as_text(data)))
    return [
        _section_series(link, direction, rows, zone, capacity, shift, interval_s)
        for direction, rows in sections
    ]


def read_router_csv_file(
    path: str | Path,
    capacity_bps: float,
    timezone: str = "Europe/Zurich",
    row_time: RowTime = "end",
    interval_s: int = 300,
) -> list[UtilisationSeries]:
    """``parse_router_csv`` on a file."""
    return parse_file(
        path,
        parse_router_csv,
        capacity_bps=capacity_bps,
        timezone=timezone,
        row_time=row_time,
        interval_s=interval_s,
    )


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise RouterDataError(f"unknown time zone {name!r}") from None


def _row_time_shift(row_time: RowTime, interval_s: int) -> int:
    """Seconds from a row's time back to the start of its interval."""
    if row_time not in ("start", "end"):
        raise ValueError(f"row_time must be 'start' or 'end', not {row_time!r}")
    return interval_s if row_time == "end" else 0


def _split(text: str) -> _Export:
    export = _Export()
    section: Direction | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        label = line.rstrip(",").strip().strip('"')
        if label.startswith(ROUTER_PREFIX):
            _name_router(export, label, number)
        elif label in SECTION_HEADERS:
            section = _open_section(export, SECTION_HEADERS[label], number)
        elif line and section is not None:
            export.sections[section].append((number, line))
    return export


def _name_router(export: _Export, label: str, number: int) -> None:
    name = label.removeprefix(ROUTER_PREFIX).strip()
    if export.link is not None:
        raise RouterDataError(f"line {number}: second {ROUTER_PREFIX} line")
    if not name:
        raise RouterDataError(f"line {number}: {ROUTER_PREFIX} line names no router")
    export.link = name


def _open_section(export: _Export, direction: Direction, number: int) -> Direction:
    if direction in export.sections:
        raise RouterDataError(f"line {number}: second 'Bits {direction.title()}' section")
    export.sections[direction] = []
    return direction


def _complete(export: _Export) -> tuple[str, list[tuple[Direction, list[tuple[int, str]]]]]:
    """The link key and the (direction, rows) of the in then out section; all must be there."""
    if export.link is None:
        raise RouterDataError(f"no '{ROUTER_PREFIX} <name>' line")
    for header, direction in SECTION_HEADERS.items():
        if not export.sections.get(direction):
            raise RouterDataError(f"section '{header}' is missing or has no rows")
    return export.link, [(d, export.sections[d]) for d in SECTION_HEADERS.values()]


def _section_series(
    link: str,
    direction: Direction,
    rows: list[tuple[int, str]],
    zone: ZoneInfo,
    capacity: float,
    shift: int,
    period: int,
) -> UtilisationSeries:
    samples: list[tuple[int, float]] = []
    previous: int | None = None
    for number, line in rows:
        local, bits_per_second = _parse_row(line, number)
        previous = _resolve_epoch(local, zone, previous, number)
        samples.append((previous - shift, bits_per_second / capacity))
    return build_series(link, direction, samples, period)


def _parse_row(line: str, number: int) -> tuple[datetime, float]:
    fields = next(csv.reader([line]))
    if len(fields) != 2:
        raise RouterDataError(f"line {number}: expected 'MM/DD/YY HH:MM,<bits/s>', got {line!r}")
    try:
        local = datetime.strptime(fields[0].strip(), ROW_TIME_FORMAT)
    except ValueError:
        raise RouterDataError(f"line {number}: time {fields[0]!r} is not MM/DD/YY HH:MM") from None
    return local, parse_rate(fields[1].strip(), f"line {number}: bits/s")


def _resolve_epoch(local: datetime, zone: ZoneInfo, previous: int | None, number: int) -> int:
    """The earliest UTC instant for wall time ``local`` after ``previous`` (see module doc)."""
    candidates = sorted({_epoch(local, zone, fold) for fold in (0, 1)})
    if datetime.fromtimestamp(candidates[0], zone).replace(tzinfo=None) != local:
        raise RouterDataError(f"line {number}: {local:%m/%d/%y %H:%M} does not exist in {zone}")
    later = [epoch for epoch in candidates if previous is None or epoch > previous]
    if not later:
        raise RouterDataError(f"line {number}: {local:%m/%d/%y %H:%M} is not after the row before")
    return later[0]


def _epoch(local: datetime, zone: ZoneInfo, fold: int) -> int:
    return math.floor(local.replace(tzinfo=zone, fold=fold).timestamp())
