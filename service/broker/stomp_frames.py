"""Drop-ins for stomp.py's frame parser that skip the regex and copy work plain frames never need.

stomp.py 9.0 finds a frame's header block and splits its lines with regexes, matches every
header line with another, runs `re.sub` twice per header to undo STOMP 1.2 escapes (`\\n`,
`\\c`, `\\\\`, `\\r`) although a header without a backslash has nothing to undo, and `copy.copy`s
the header dict. For a MESSAGE frame of ~10 headers that was most of the receiver thread's time
(py-spy, docs/performance.md). `stomp_transport`'s receive path calls `parse_frame` below
instead: the same result for every input (tested against stomp.py's own functions), with
`bytes.find`, `str.split` and `str.partition`, unescaping only where a backslash occurs.
"""

from __future__ import annotations

import re

import stomp.utils

#: stomp.py's own parsers, kept for comparison in tests and benchmarks.
STOMP_PARSE_HEADERS = stomp.utils.parse_headers
STOMP_PARSE_FRAME = stomp.utils.parse_frame
_unescape = re.compile(r"\\.").sub


def parse_headers(lines: list[str], offset: int = 0) -> dict[str, str]:
    """Headers of a frame's preamble lines from `offset` on; the first of a repeated key wins."""
    headers: dict[str, str] = {}
    for line in lines[offset:]:
        key, colon, value = line.partition(":")
        if not (key and colon):
            continue
        if "\\" in key:
            key = _unescaped(key)
        if key not in headers:
            headers[key] = _unescaped(value) if "\\" in value else value
    return headers


def _unescaped(text: str) -> str:
    """`text` with STOMP escapes undone; ActiveMQ escapes only the colons of its message ids."""
    if text.count("\\") == text.count("\\c"):  # every backslash starts a "\c"
        return text.replace("\\c", ":")
    return _unescape(stomp.utils._unescape_header, text)


def parse_frame(frame: bytes) -> stomp.utils.Frame | None:
    """A received frame's command, headers and body; None for a frame of empty lines only."""
    preamble_end, body_start = preamble_bounds(frame)
    preamble = frame[:preamble_end].decode(errors="replace")
    lines = preamble.split("\n")
    if "\r" in preamble:  # lines end in LF or CRLF (STOMP 1.2): drop the CR of a CRLF
        lines = [line[:-1] if line.endswith("\r") else line for line in lines[:-1]] + lines[-1:]
    first = 0
    while first < len(lines) and not lines[first]:
        first += 1
    if first >= len(lines):
        return None
    parsed = stomp.utils.Frame.__new__(stomp.utils.Frame)  # as Frame(), without copy.copy
    parsed.cmd = lines[first]
    parsed.headers = parse_headers(lines, first + 1)
    parsed.original_headers = parsed.headers.copy()
    parsed.body = frame[body_start:]
    return parsed


def preamble_bounds(
    buffer: bytes | bytearray, start: int = 0, end: int | None = None
) -> tuple[int, int]:
    """Where the header block of buffer[start:end] ends and its body starts: at the first blank
    line (LF or CRLF); both `end` when there is none."""
    end = len(buffer) if end is None else end
    lf = buffer.find(b"\n\n", start, end)
    crlf = buffer.find(b"\r\n\r\n", start, end if lf < 0 else lf + 3)  # one that starts first
    if crlf >= 0:
        return crlf, crlf + 4
    return (lf, lf + 2) if lf >= 0 else (end, end)
