"""A response leaves in one write: uvicorn's real protocol, driven with a request, over a
transport that records each call. With uvicorn's own protocol the same response takes two
writes (headers, then body): the canary for why `WholeResponseProtocol` exists."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from service.publish.whole_response import (
    FLUSH_BYTES,
    TurnBufferedTransport,
    WholeResponseProtocol,
)

BODY = {"links": [{"source": "192.0.2.1", "destination": "198.51.100.20", "cost": 0.25}]}


class RecordingTransport(asyncio.Transport):
    """A socket's transport that records what each call would hand to the kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[bytes]] = []
        self.closing = False

    def write(self, data: Any) -> None:
        self.calls.append([bytes(data)])

    def writelines(self, list_of_data: Any) -> None:
        self.calls.append([bytes(data) for data in list_of_data])

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def writes_of_one_response(protocol_class: type[HttpToolsProtocol]) -> list[list[bytes]]:
    app = FastAPI()

    @app.get("/costmatrix")
    def costmatrix() -> dict[str, Any]:
        return BODY

    async def exchange() -> list[list[bytes]]:
        config = uvicorn.Config(app, log_config=None, http=protocol_class)
        config.load()
        loop = asyncio.get_running_loop()
        protocol = protocol_class(config, ServerState(), {}, _loop=loop)
        transport = RecordingTransport()
        protocol.connection_made(transport)
        protocol.data_received(b"GET /costmatrix HTTP/1.1\r\nHost: nettel\r\n\r\n")
        for _ in range(200):
            if protocol.cycle is not None and protocol.cycle.response_complete:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)  # the turn that flushes
        protocol.connection_lost(None)
        return transport.calls

    return asyncio.run(exchange())


def test_headers_and_body_leave_in_one_call() -> None:
    (call,) = writes_of_one_response(WholeResponseProtocol)
    response = b"".join(call)
    assert response.startswith(b"HTTP/1.1 200 OK\r\n")
    assert response.endswith(b'"cost":0.25}]}')


def test_uvicorns_own_protocol_writes_headers_and_body_apart() -> None:
    headers, body = writes_of_one_response(HttpToolsProtocol)
    assert b"".join(headers).endswith(b"\r\n\r\n") and b"".join(body).endswith(b"}]}")


def test_close_sends_what_is_pending_first_and_later_writes_are_dropped() -> None:
    async def run() -> RecordingTransport:
        socket_transport = RecordingTransport()
        transport = TurnBufferedTransport(socket_transport, asyncio.get_running_loop())
        transport.write(b"head")
        transport.writelines([b"bo", b"dy"])
        assert socket_transport.calls == [] and transport.get_write_buffer_size() == 8
        transport.close()
        transport.write(b"late")
        await asyncio.sleep(0)
        return socket_transport

    socket_transport = asyncio.run(run())
    assert socket_transport.calls == [[b"head", b"bo", b"dy"]] and socket_transport.closing


def test_abort_drops_what_is_pending() -> None:
    async def run() -> RecordingTransport:
        socket_transport = RecordingTransport()
        transport = TurnBufferedTransport(socket_transport, asyncio.get_running_loop())
        transport.write(b"cut")
        transport.abort()
        await asyncio.sleep(0)
        return socket_transport

    assert asyncio.run(run()).calls == []


def test_a_large_body_leaves_with_the_headers_without_waiting_for_the_turn() -> None:
    async def run() -> tuple[list[list[bytes]], list[list[bytes]]]:
        socket_transport = RecordingTransport()
        transport = TurnBufferedTransport(socket_transport, asyncio.get_running_loop())
        transport.write(b"head")
        transport.write(b"x" * FLUSH_BYTES)
        before_the_turn_ends = list(socket_transport.calls)
        transport.write(b"tail")
        await asyncio.sleep(0)
        return before_the_turn_ends, socket_transport.calls

    before, after = asyncio.run(run())
    assert before == [[b"head", b"x" * FLUSH_BYTES]]
    assert after == [*before, [b"tail"]]
