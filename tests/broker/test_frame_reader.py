"""FrameReader: stomp.py's framing in linear work, at most MAX bytes of a frame kept (issue 40).

Linearity is asserted on the reader's own counts of the bytes it copies and scans, which do not
depend on the machine; the CPU-time figures are in scripts/hostile_frames.py.
"""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from service.broker.stomp_frames import preamble_bounds
from service.broker.stomp_transport import FrameReader, split_frames
from tests.broker.test_stomp_transport import streams

CHUNK = 128 * 1024


def fed(reader: FrameReader, stream: bytes, chunk: int = CHUNK) -> list[bytes]:
    return [f for at in range(0, len(stream), chunk) for f in reader.feed(stream[at : at + chunk])]


def message(body: bytes, declared: bool = True) -> bytes:
    length = b"content-length:%d\n" % len(body) if declared else b""
    return b"MESSAGE\ndestination:/topic/x\nmessage-id:m1\n" + length + b"\n" + body + b"\x00\n"


@given(streams(), st.integers(1, 64), st.integers(20, 200))
@settings(max_examples=400, deadline=None)
def test_a_bounded_reader_gives_each_frame_or_its_first_bytes(
    chunks: list[bytes], chunk: int, bound: int
) -> None:
    stream = b"".join(chunks)
    whole = fed(FrameReader(max_frame_bytes=None), stream, chunk)
    if chunk >= len(stream):
        assert whole == split_frames(stream)[0]
    # a frame whose header block alone passes the bound ends at its first NUL: no length is read
    assume(all(preamble_bounds(frame)[1] <= bound for frame in whole))
    reader = FrameReader(max_frame_bytes=bound)
    got = fed(reader, stream, chunk)
    assert got[: len(whole)] == [frame[:bound] for frame in whole]
    assert reader.frames_cut >= sum(len(frame) > bound for frame in whole)


def test_a_16_mib_body_of_nul_bytes_costs_what_one_without_nul_costs() -> None:
    size = 16 * 1024 * 1024
    work = {}
    for name, body in (("nul", bytes(size)), ("plain", b"x" * size)):
        reader = FrameReader(max_frame_bytes=None)
        stream = message(body) + message(b"{}")
        frames = fed(reader, stream)
        assert [len(frame) for frame in frames][0] == len(stream) - len(message(b"{}")) - 2
        assert frames[1].endswith(b"\n\n{}")
        work[name] = reader.bytes_copied + reader.bytes_scanned
        assert reader.bytes_copied <= 3 * len(stream)  # appended, cut out, the tail moved
        assert reader.bytes_scanned <= 2 * len(stream)
    assert work["nul"] <= 1.1 * work["plain"]  # the old reader copied the buffer for every read


def test_an_endless_frame_keeps_at_most_the_bound() -> None:
    bound = 2 * 1024 * 1024
    reader = FrameReader(max_frame_bytes=bound, clock=lambda: 7.0)
    assert reader.feed(b"MESSAGE\ndestination:/topic/x\n\n") == []
    for _ in range(128 * 8):  # 128 MiB, never ended
        assert reader.feed(b"y" * CHUNK) == []
        assert len(reader.pending) <= bound
    assert reader.frame_started == 7.0 and not reader.between_frames


def test_a_cut_frame_is_delivered_at_its_end_and_the_next_one_whole() -> None:
    bound = 1000
    for declared, filler in ((True, b"\x00ab"), (False, b"abc")):  # NULs need a length
        body = filler * 5000
        reader = FrameReader(max_frame_bytes=bound)
        stream = message(body, declared) + message(b"{}") + message(b"[]")
        frames = fed(reader, stream, chunk=777)
        assert [frame[:bound] for frame in frames] == [
            message(body, declared)[:bound],
            message(b"{}")[:-2],
            message(b"[]")[:-2],
        ]
        assert reader.frames_cut == 1 and reader.between_frames
        assert reader.frame_started is None


def test_line_feeds_alone_start_no_frame() -> None:
    reader = FrameReader(clock=lambda: 1.0)
    reader.feed(b"\n\n")
    assert reader.frame_started is None
    reader.feed(b"MESSAGE\n")
    assert reader.frame_started == 1.0
