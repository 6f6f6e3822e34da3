"""A drop-in for stomp.py's frame-header parser that skips the regex work plain headers never need.

stomp.py 9.0 matches every header line with a regex and runs `re.sub` twice per header to undo
STOMP 1.2 escapes (`\\n`, `\\c`, `\\\\`, `\\r`), although a header without a backslash has nothing
to undo. For a MESSAGE frame of ~10 headers that is ~20 regex calls, almost half of the receiver
thread's time (py-spy, docs/performance.md). `install()` replaces `stomp.utils.parse_headers`,
which stomp.py's `parse_frame` looks up at call time, with `parse_headers` below: the same result
for every input (tested against stomp.py's own function), split with `str.partition` and
unescaped only where a backslash occurs.
"""

from __future__ import annotations

import re

import stomp.utils

#: stomp.py's own parser, kept for comparison in tests and benchmarks.
STOMP_PARSE_HEADERS = stomp.utils.parse_headers
_unescape = re.compile(r"\\.").sub


def parse_headers(lines: list[str], offset: int = 0) -> dict[str, str]:
    """Headers of a frame's preamble lines from `offset` on; the first of a repeated key wins."""
    headers: dict[str, str] = {}
    for line in lines[offset:]:
        key, colon, value = line.partition(":")
        if not (key and colon):
            continue
        if "\\" in key:
            key = _unescape(stomp.utils._unescape_header, key)
        if key not in headers:
            headers[key] = (
                _unescape(stomp.utils._unescape_header, value) if "\\" in value else value
            )
    return headers


def install() -> None:
    """Make stomp.py parse frame headers with `parse_headers` (idempotent)."""
    stomp.utils.parse_headers = parse_headers
