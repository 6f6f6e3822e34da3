"""The HTTP front door over a real uvicorn server configured as `nettel serve` configures it
(`http_config`): oversized headers get 431, half-sent requests 408 after the header timeout,
connections beyond the limit 503, each counted; X-Forwarded-For is believed only from
--trusted-proxies; /costmatrix/stream stops at --sse-max-streams; refusals name the client.
The floods are small (a 64 KiB limit, 16 connections); the big ones are in
`python -m benchmarks --only front_door`."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import uvicorn

from devtools.activemq import free_port
from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.config import Settings
from service.publish.app import create_app
from service.publish.http_server import http_config
from service.runtime import Runtime, build_runtime
from tests.run_factory import run_body

TOKEN = "ingest-secret-7f3a"
Served = tuple[str, Runtime]


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """`serve(**settings)`: `nettel serve`'s app and HTTP settings on a free loopback port."""
    running: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(**settings: object) -> Served:
        base = {"model": "none", "publish_telemetry": False}
        runtime = build_runtime(Settings(**(base | settings)))  # type: ignore[arg-type]
        assert runtime.intake is not None
        runtime.intake.start()  # takes runs (the rest of the service is not started)
        app = create_app(runtime)
        port = free_port()
        config = http_config(
            app, "127.0.0.1", port, runtime.http_guard, runtime.settings.trusted_proxies
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        wait_for(lambda: server.started, timeout=20, interval=0.02, what="uvicorn started")
        running.append((server, thread))
        return f"http://127.0.0.1:{port}", runtime

    yield start
    for server, thread in running:
        server.should_exit = True
        thread.join(10)


def refused(url: str, reason: str) -> float:
    return metric_value(url, "nettel_http_refused_total", reason=reason)


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def request_with_header(url: str, size: int) -> bytes:
    """GET /healthz with one header of `size` bytes, sent in 64 KiB pieces; the answer (b""
    when the connection was reset: refused while still sending, past what the server reads)."""
    with connect(url) as sock:
        head = b"GET /healthz HTTP/1.1\r\nHost: nettel\r\nConnection: close\r\nX-Pad: "
        try:
            sock.sendall(head)
            for start in range(0, size, 65536):
                sock.sendall(b"a" * min(65536, size - start))
            sock.sendall(b"\r\n\r\n")
            return answer(sock)
        except (BrokenPipeError, ConnectionResetError):
            return b""


def test_a_header_over_the_limit_is_answered_431_and_counted(serve) -> None:
    url, _ = serve(http_max_header_bytes=64 << 10)
    assert request_with_header(url, 60 << 10).startswith(b"HTTP/1.1 200 ")
    assert request_with_header(url, 65 << 10).startswith(b"HTTP/1.1 431 ")
    huge = request_with_header(url, 8 << 20)  # 8 MiB: refused after 64 KiB, not read further
    assert huge == b"" or huge.startswith(b"HTTP/1.1 431 ")
    assert refused(url, "header_too_large") == 2
    assert httpx.get(url + "/healthz").status_code == 200


def test_a_half_sent_request_is_closed_after_the_header_timeout(serve) -> None:
    """Slowloris: a request line and part of the headers, then nothing; and a connection that
    sends nothing at all. Both are answered 408 and closed once the timeout passes."""
    url, _ = serve(http_header_timeout=0.5)
    with connect(url) as slow, connect(url) as silent:
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: nettel\r\nX-A: b\r\n")
        started = time.monotonic()
        assert answer(slow).startswith(b"HTTP/1.1 408 ")
        assert answer(silent).startswith(b"HTTP/1.1 408 ")
        assert time.monotonic() - started < 5
    assert refused(url, "header_timeout") == 2
    # a request sent in time on a kept-alive connection is not cut
    with httpx.Client(base_url=url) as client:
        for _ in range(3):
            assert client.get("/healthz").status_code == 200
            time.sleep(0.3)


def test_connections_beyond_the_limit_are_answered_503_and_closed(serve) -> None:
    url, _ = serve(http_max_connections=16, http_header_timeout=30)
    idle = [connect(url) for _ in range(15)]
    try:
        wait_for(
            lambda: metric_value(url, "nettel_http_connections") == 16,  # with this request's
            timeout=10,
            what="15 idle connections open",
        )
        idle.append(connect(url))
        time.sleep(0.3)
        with connect(url) as extra:
            assert answer(extra).startswith(b"HTTP/1.1 503 ")
    finally:
        for sock in idle:
            sock.close()
    wait_for(lambda: httpx.get(url + "/healthz").status_code == 200, timeout=10, what="room again")
    assert refused(url, "connection_limit") == 1


def post_runs(url: str, forwarded: bool) -> list[int]:
    statuses = []
    for number in range(8):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        if forwarded:
            headers["X-Forwarded-For"] = f"203.0.113.{number + 1}"
        statuses.append(
            httpx.post(url + "/ingest/pscheduler", content=run_body(), headers=headers).status_code
        )
    return statuses


def test_forwarded_for_does_not_escape_the_rate_limit_unless_from_a_trusted_proxy(serve) -> None:
    limits = {"ingest_token": TOKEN, "ingest_client_rate": 0.01, "ingest_client_burst": 2}
    url, _ = serve(**limits)
    assert post_runs(url, forwarded=True).count(429) == 6  # one client, whatever it claims
    proxied, _ = serve(**limits, trusted_proxies="127.0.0.1/32")
    assert post_runs(proxied, forwarded=True) == [202] * 8  # the proxy names eight clients


def test_ingest_refusals_name_the_client(serve, caplog: pytest.LogCaptureFixture) -> None:
    url, _ = serve(ingest_token=TOKEN)
    with caplog.at_level(logging.WARNING, "nettel.ingest"):
        assert httpx.post(url + "/ingest/pscheduler", content=run_body()).status_code == 401
    (record,) = [r for r in caplog.records if getattr(r, "reason", None) == "unauthorized"]
    assert record.client == "127.0.0.1"  # type: ignore[attr-defined]


def test_stream_subscribers_beyond_the_limit_are_refused(serve) -> None:
    url, _ = serve(sse_max_streams=2)
    with httpx.Client(base_url=url, timeout=10) as client:
        with client.stream("GET", "/costmatrix/stream") as first:
            with client.stream("GET", "/costmatrix/stream") as second:
                assert first.status_code == second.status_code == 200
                wait_for(
                    lambda: (
                        metric_value(url, "nettel_sse_streams", endpoint="costmatrix_stream") == 2
                    ),
                    timeout=10,
                    what="two streams open",
                )
                third = client.get("/costmatrix/stream")
                assert third.status_code == 503 and third.headers["retry-after"] == "30"
    assert refused(url, "stream_limit") == 1
