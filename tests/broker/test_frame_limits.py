"""A hostile peer on the wire: an endless frame is held to the bound, the connection counts as
not connected once stuck, is dropped after the frame timeout (counted) and made again; a frame
over the bound is delivered cut, so its message is refused and acknowledged, not redelivered."""

from __future__ import annotations

import socket
import threading

from devtools.waiting import wait_for
from service.broker.link import BrokerAccess
from service.broker.stomp_transport import MAX_FRAME_BYTES
from service.ingest.stomp_source import StompSource, SubscriptionSpec
from tests.broker.hostile_broker import HostileBroker, receipts
from tests.frame_recorder import FrameRecorder

TOPIC = "/topic/perfsonar.raw.packet-loss-rate"
HEADERS = b"MESSAGE\ndestination:" + TOPIC.encode() + b"\nsubscription:0\nmessage-id:m"


def source_of(broker: HostileBroker, got: list) -> StompSource:
    # heart-beats of 2 s x 2: the frame timeout is 4 s, unready after 2 s (the peer answers
    # without heart-beats)
    access = BrokerAccess([("127.0.0.1", broker.port)], heartbeat_ms=2000, heartbeat_tolerance=2)
    spec = SubscriptionSpec(mode="plain", ack="client")
    return StompSource(access, [TOPIC], FrameRecorder(got.append), subscription=spec)


def test_an_endless_frame_is_bounded_unready_then_dropped_counted_and_reconnected() -> None:
    sent = threading.Event()

    def script(number: int, sock: socket.socket) -> None:
        receipts(sock)
        if number == 0:  # 8 MiB of a frame that never ends, then silence
            sock.sendall(HEADERS + b"1\n\n" + b"y" * (8 * 1024 * 1024))
            sent.set()
            broker.hold_open()
        else:
            sock.sendall(HEADERS + b"2\ncontent-length:2\n\n{}\x00\n")
            broker.hold_open()

    broker = HostileBroker(script)
    got: list = []
    source = source_of(broker, got)
    source.connect()
    try:
        wait_for(sent.is_set, timeout=10, what="the endless frame sent")
        link = source._link
        connection = link.connection
        assert connection is not None
        wait_for(lambda: not source.connected, timeout=5, what="stuck: not connected")
        assert link.connection is connection and link.stuck  # not yet dropped, but unready
        assert len(connection.transport.frames.pending) <= MAX_FRAME_BYTES
        wait_for(lambda: got, timeout=10, what="the next connection's message")
        assert source.dropped == {"frame_timeout": 1}
        assert source.connections == 2 and source.connected
        assert [(topic, body) for topic, body, _ in got] == [(TOPIC, b"{}")]
    finally:
        source.disconnect()
        broker.close()


def test_a_frame_over_the_bound_is_delivered_cut_on_the_same_connection() -> None:
    big = b"[" + b"1," * (3 * 1024 * 1024) + b"1]"  # 6 MiB, as a broker relays a big message

    def script(number: int, sock: socket.socket) -> None:
        receipts(sock)
        sock.sendall(HEADERS + b"1\n\n" + big + b"\x00\n")  # a text message: no length
        sock.sendall(HEADERS + b"2\ncontent-length:2\n\n{}\x00\n")
        broker.hold_open()

    broker = HostileBroker(script)
    got: list = []
    source = source_of(broker, got)
    source.connect()
    try:
        wait_for(lambda: len(got) == 2, timeout=10, what="both messages")
        cut, small = got
        assert len(cut[1]) < MAX_FRAME_BYTES and big.startswith(cut[1])
        assert cut[2].ack_id == "m1"  # acknowledged like any refused message
        assert small[1] == b"{}"
        assert source.frames_cut == 1 and source.dropped == {} and source.connections == 1
    finally:
        source.disconnect()
        broker.close()
