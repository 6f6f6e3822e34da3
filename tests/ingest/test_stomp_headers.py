"""The header fast path gives stomp.py's own result for every input."""

from __future__ import annotations

import stomp.utils
from hypothesis import given
from hypothesis import strategies as st

from service.ingest.stomp_headers import STOMP_PARSE_HEADERS, install, parse_headers

#: Characters that matter to the grammar (colon, escapes, CR) mixed with ordinary ones.
_LINE = st.text(alphabet=st.sampled_from(list(":\\ncr\rab-é ")), max_size=12)


@given(st.lists(_LINE, max_size=8), st.integers(0, 3))
def test_equals_stomp_parser_on_any_lines(lines: list[str], offset: int) -> None:
    assert parse_headers(lines, offset) == STOMP_PARSE_HEADERS(lines, offset)


def test_unescapes_and_keeps_the_first_of_repeated_keys() -> None:
    lines = ["MESSAGE", "a\\cb:x\\ny", "a\\cb:second", "plain:v:w", ":no key", "no colon"]
    assert parse_headers(lines, 1) == {"a:b": "x\ny", "plain": "v:w"}


def test_install_makes_stomp_frames_use_it() -> None:
    install()
    frame = stomp.utils.parse_frame(b"MESSAGE\ndestination:/topic/t\nmessage-id:m\\c1\n\nbody")
    assert stomp.utils.parse_headers is parse_headers
    assert frame.headers == {"destination": "/topic/t", "message-id": "m:1"}
    assert frame.body == b"body"
