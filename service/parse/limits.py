"""Bounds on untrusted input, applied before and while parsing."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class InputLimits:
    """Largest input nettel will parse; anything beyond is rejected with a reason."""

    max_body_bytes: int = 1 << 20
    max_datapoints: int = 100
    max_buckets: int = 10_000
    max_string_length: int = 255
