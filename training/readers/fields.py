"""Field-level parsing shared by the readers: timestamps, rates and capacities."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from training.readers.errors import RouterDataError

#: Epoch numbers at or above this are milliseconds (CERN MONIT convention); as seconds they
#: would lie after the year 5000.
EPOCH_MILLISECONDS_FROM = 1e11


def parse_epoch(value: Any, where: str) -> int:
    """Epoch seconds (UTC) from a JSON number, a numeric string or an ISO 8601 string.

    Fractions of a second are dropped; numbers >= 1e11 are read as epoch milliseconds;
    ISO 8601 without a UTC offset is taken as UTC.

    >>> parse_epoch("2017-10-29T01:00:00+01:00", "x"), parse_epoch(1509238800500, "x")
    (1509235200, 1509238800)
    """
    if isinstance(value, str):
        return _epoch_from_text(value.strip(), where)
    seconds = _finite_number(value, where)
    if seconds >= EPOCH_MILLISECONDS_FROM:
        seconds /= 1000.0
    if seconds < 0:
        raise RouterDataError(f"{where}: negative timestamp {value!r}")
    return math.floor(seconds)


def parse_rate(value: Any, where: str) -> float:
    """A non-negative finite rate from a number or numeric string; empty or null means NaN."""
    if value is None or value == "":
        return math.nan
    number = _number_from_text(value, where) if isinstance(value, str) else value
    rate = _finite_number(number, where)
    if rate < 0:
        raise RouterDataError(f"{where}: negative rate {value!r}")
    return rate


def check_capacity(capacity_bps: float, what: str = "capacity") -> float:
    """Return a link capacity in bits/s as float, refusing zero, negative and non-finite ones."""
    if isinstance(capacity_bps, bool) or not isinstance(capacity_bps, int | float):
        raise RouterDataError(f"{what} must be a number of bits/s, not {capacity_bps!r}")
    if not math.isfinite(capacity_bps) or capacity_bps <= 0:
        raise RouterDataError(f"{what} must be a positive number of bits/s, not {capacity_bps!r}")
    return float(capacity_bps)


def _epoch_from_text(text: str, where: str) -> int:
    try:
        number = float(text)
    except ValueError:
        return _epoch_from_iso(text, where)
    return parse_epoch(number, where)


def _epoch_from_iso(text: str, where: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise RouterDataError(f"{where}: not an epoch or ISO 8601 time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return math.floor(moment.timestamp())


def _number_from_text(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise RouterDataError(f"{where}: not a number: {text!r}") from None


def _finite_number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RouterDataError(f"{where}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise RouterDataError(f"{where}: not a finite number: {value!r}")
    return float(value)
