"""Throughput results and TCP retransmit counts, as perfSONAR writes them.

- The bus (esmond's event types `throughput` and `packet-retransmits`, both layouts): a datapoint's
  value is the test's throughput in bits per second (esmond stores it as an integer; the
  collectors send it as a JSON number) or its retransmit count, keyed by the test's start.
- pScheduler's `throughput` test (tools iperf3 and nuttcp), as its `http` archiver sends the run:
  `result.summary.summary` holds `throughput-bits` (the whole test's sender rate, bits/s) and,
  for TCP, `retransmits` (null or absent for UDP, and for tools that do not report them).

Numbers may arrive as JSON numbers or numeric strings (esmond's clients pass either through).
"""

from __future__ import annotations

import math
from typing import Any

from service.errors import RejectedInput, RejectReason
from service.parse.json_fields import check_length, require_object
from service.parse.limits import InputLimits

#: The fastest throughput taken (bits/s): 10 Tb/s, 25 times a 400 Gb/s test host's interface.
MAX_THROUGHPUT_BPS = 1e13
#: The most retransmits taken for one test (2^53: still exact as a float).
MAX_RETRANSMITS = 1 << 53


def read_throughput(value: Any, limits: InputLimits) -> float:
    """A throughput in bits/s: a finite number (or numeric string) in 0 .. MAX_THROUGHPUT_BPS.

    >>> read_throughput(9412345678, InputLimits()), read_throughput("1.5e9", InputLimits())
    (9412345678.0, 1500000000.0)
    """
    number = _number(value, "throughput", limits)
    if not math.isfinite(number) or not 0.0 <= number <= MAX_THROUGHPUT_BPS:
        raise RejectedInput(RejectReason.THROUGHPUT_OUT_OF_RANGE, repr(value)[:40])
    return number


def read_retransmits(value: Any, limits: InputLimits) -> int:
    """A retransmit count: a whole number (or its text) in 0 .. MAX_RETRANSMITS."""
    if isinstance(value, str):
        check_length(value, "retransmits", limits)
        value = value.strip()
        if not (value.isascii() and value.isdigit()):
            raise RejectedInput(RejectReason.BAD_VALUE, "retransmits is not a count")
        value = int(value)
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int or not 0 <= value <= MAX_RETRANSMITS:
        raise RejectedInput(RejectReason.BAD_VALUE, "retransmits is not a count")
    return value


def read_throughput_result(result: dict[str, Any], limits: InputLimits) -> tuple[float, int | None]:
    """A pScheduler throughput run's rate (bits/s) and retransmits (None when not reported)."""
    summary = require_object(result.get("summary"), "result.summary")
    totals = require_object(summary.get("summary"), "result.summary.summary")
    bits = totals.get("throughput-bits")
    if bits is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, "result.summary.summary.throughput-bits")
    retransmits = totals.get("retransmits")
    return (
        read_throughput(bits, limits),
        None if retransmits is None else read_retransmits(retransmits, limits),
    )


def _number(value: Any, what: str, limits: InputLimits) -> float:
    if isinstance(value, str):
        check_length(value, what, limits)
        try:
            return float(value)
        except ValueError:
            raise RejectedInput(RejectReason.BAD_VALUE, f"{what} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RejectedInput(RejectReason.BAD_VALUE, f"{what} is not a number")
    return float(value)  # orjson gives no integer beyond 2**64: every one is a float
