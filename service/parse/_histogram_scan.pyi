"""Types of the C histogram scanner (`_histogram_scan.c`); see its `scan` docstring."""

from collections.abc import Sequence

def scan(bodies: Sequence[bytes], /) -> tuple[list[bytes], bytes, bytes, bytes, bytes]:
    """(documents, placed, delays, counts, lengths): the arrays packed as int64/float64 bytes."""
