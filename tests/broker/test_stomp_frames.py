"""The frame and header fast paths give stomp.py's own result for every input."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.broker.stomp_frames import (
    STOMP_PARSE_FRAME,
    STOMP_PARSE_HEADERS,
    parse_frame,
    parse_headers,
)

#: Characters that matter to the grammar (colon, escapes, CR) mixed with ordinary ones.
_LINE = st.text(alphabet=st.sampled_from(list(":\\ncr\rab-é ")), max_size=12)
#: Frames: the bytes that delimit lines and blocks, escapes, and bytes that are not UTF-8.
_FRAME = st.lists(
    st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\n", b":", b"\\c", b"MESSAGE", b"a", b"\xff", b""]),
    max_size=14,
).map(b"".join)


@given(st.lists(_LINE, max_size=8), st.integers(0, 3))
def test_headers_equal_stomp_parser_on_any_lines(lines: list[str], offset: int) -> None:
    assert parse_headers(lines, offset) == STOMP_PARSE_HEADERS(lines, offset)


@given(_FRAME)
@settings(max_examples=1000, deadline=None)
def test_frame_equals_stomp_parser_on_any_bytes(frame: bytes) -> None:
    ours, theirs = parse_frame(frame), STOMP_PARSE_FRAME(frame)
    assert (ours is None) == (theirs is None)
    if theirs is not None:
        assert type(ours) is type(theirs)
        assert vars(ours) == vars(theirs)


def test_headers_unescape_and_keep_the_first_of_repeated_keys() -> None:
    lines = ["MESSAGE", "a\\cb:x\\ny", "a\\cb:second", "plain:v:w", ":no key", "no colon"]
    assert parse_headers(lines, 1) == {"a:b": "x\ny", "plain": "v:w"}


def test_frame_with_crlf_lines_and_a_body_holding_blank_lines() -> None:
    frame = parse_frame(b"\nMESSAGE\r\ndestination:/topic/t\r\n\r\n{\n\n}")
    assert frame is not None
    assert (frame.cmd, frame.headers, frame.body) == (
        "MESSAGE",
        {"destination": "/topic/t"},
        b"{\n\n}",
    )
    assert frame.original_headers == frame.headers and frame.original_headers is not frame.headers
