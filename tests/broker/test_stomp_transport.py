"""The buffered receive path hands listeners what stomp.py's own reader would, for any stream."""

from __future__ import annotations

import inspect
from typing import Any

import stomp
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.support.receive_path import ReplayedReads
from service.broker.stomp_transport import BufferedTransport, split_frames


class Recorder(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_before_message(self, frame: stomp.utils.Frame) -> None:
        self.events.append(("before", frame.cmd, frame.headers))

    def on_message(self, frame: stomp.utils.Frame) -> None:
        headers = (frame.headers, frame.original_headers)
        self.events.append(("message", frame.cmd, headers, frame.body))

    def on_error(self, frame: stomp.utils.Frame) -> None:
        self.events.append(("error", frame.cmd, frame.headers, frame.body))

    def on_heartbeat(self) -> None:
        self.events.append(("heartbeat",))


class StompPyReader(ReplayedReads, stomp.transport.Transport):
    pass


class BufferedReader(ReplayedReads, BufferedTransport):
    pass


def events_seen(reader: ReplayedReads) -> list[tuple[Any, ...]]:
    recorder = Recorder()
    reader.set_listener("recorder", recorder)  # type: ignore[attr-defined]
    reader.read_all()
    return recorder.events


_TEXT = st.sampled_from(["/topic/a", "m\\c1", "x:y", "", " 12", "é", "a\\nb"])


@st.composite
def frame_bytes(draw: st.DrawFn) -> bytes:
    """A frame as a broker might send it, with the oddities the grammar allows."""
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    command = draw(st.sampled_from([b"MESSAGE", b"ERROR", b"\nMESSAGE"]))
    headers = draw(st.lists(st.tuples(st.sampled_from(["destination", "message-id", "k"]), _TEXT)))
    body = draw(st.binary(max_size=40) | st.sampled_from([b"{}", b"a\x00b", b"\n\n", b"\x00"]))
    declared = draw(st.sampled_from(["exact", "none", "short", "spaced"]))
    lines = [command] + [f"{key}:{value}".encode() for key, value in headers]
    if declared == "exact":
        lines.append(b"content-length:%d" % len(body))
    elif declared == "short":
        lines.append(b"content-length:%d" % (len(body) // 2))
    elif declared == "spaced":
        lines.append(b"content-length: %d" % len(body))
    elif b"\x00" in body:
        body = body.replace(b"\x00", b"")  # without a length a NUL would end the frame
    trailer = draw(st.sampled_from([b"", b"\n", b"\r\n", b"\n\n"]))
    return eol.join(lines) + eol + eol + body + b"\x00" + trailer


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    """Frames and lone heart-beats, cut into reads at arbitrary places."""
    parts = draw(st.lists(frame_bytes() | st.just(b"\n"), max_size=8))
    stream = b"".join(parts)
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    bounds = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@given(streams())
@settings(max_examples=600, deadline=None)
def test_listeners_see_what_stomp_py_reader_gives(chunks: list[bytes]) -> None:
    stomp_py = events_seen(StompPyReader(chunks, auto_decode=False))
    assert events_seen(BufferedReader(chunks)) == stomp_py


def test_messages_reach_only_overriding_handlers_in_listener_name_order() -> None:
    order: list[str] = []

    class Named(stomp.ConnectionListener):
        def __init__(self, name: str) -> None:
            self.name = name

        def on_message(self, frame: stomp.utils.Frame) -> None:
            order.append(self.name)

    reader = BufferedReader([b"MESSAGE\ndestination:/topic/a\n\n{}\x00"])
    reader.set_listener("b", Named("b"))
    reader.set_listener("a", Named("a"))
    reader.read_all()
    assert order == ["a", "b"]
    assert reader._look_up_message_handlers()[0] == ()  # no listener overrides on_before_message


def test_a_listener_added_later_gets_the_next_frames() -> None:
    frame = b"MESSAGE\ndestination:/topic/a\n\n{}\x00"
    reader = BufferedReader([frame])
    first = Recorder()
    reader.set_listener("first", first)
    reader.read_all()
    late = Recorder()
    reader.set_listener("late", late)
    reader.reads = [frame]
    reader.read_all()
    reader.remove_listener("first")
    reader.reads = [frame]
    reader.read_all()
    assert [event[0] for event in first.events] == ["before", "message"] * 2
    assert [event[0] for event in late.events] == ["before", "message"] * 2


def test_split_keeps_a_body_with_nul_whole_once_its_declared_length_arrived() -> None:
    frame = b"MESSAGE\ncontent-length:3\n\na\x00b\x00"
    assert split_frames(frame[:-2]) == ([], frame[:-2])
    assert split_frames(frame + b"\n\nMESSAGE\n\nx") == ([frame[:-1]], b"MESSAGE\n\nx")


def test_split_cuts_at_the_nul_without_a_blank_line_or_length() -> None:
    assert split_frames(b"CONNECTED\ncontent-length:9\x00\n") == (
        [b"CONNECTED\ncontent-length:9"],
        b"",
    )


def test_stomp_py_io_loop_still_calls_the_replaced_step() -> None:
    loop = inspect.getsource(stomp.transport.BaseTransport._BaseTransport__io_loop)
    assert "self.__read_frames()" in loop
    assert "_BaseTransport__read_frames" in vars(BufferedTransport)
