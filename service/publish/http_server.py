"""Runs the FastAPI app under uvicorn, behind the front door's limits (`http_guard`) and
believing forwarded headers only from --trusted-proxies; SIGTERM and SIGINT end in a clean exit
status 0.

`bind_listener` takes the HTTP port before anything else starts (the broker connection, the
backfill), so a second `nettel serve` on a port in use stops at once, before its broker sees a
second connection with the same client-id.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

from service.config import setting_name
from service.errors import ConfigError
from service.publish.http_guard import HttpGuard, guarded_protocol


class GracefulServer(uvicorn.Server):
    """uvicorn re-raises the stop signal after shutdown (exit 143); operators expect 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self.handle_exit)
        yield


def bind_listener(host: str, port: int) -> socket.socket:
    """A socket bound to host:port as uvicorn binds one (listening starts with the server);
    ConfigError naming --listen when the address is in use or not this machine's."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        reason = error.strerror or str(error)
        message = f"{setting_name('listen')}: cannot listen on {host}:{port}: {reason}"
        raise ConfigError(message) from None
    return listener


def http_config(
    app: FastAPI,
    host: str,
    port: int,
    guard: HttpGuard | None = None,
    trusted_proxies: str | None = None,
) -> uvicorn.Config:
    """uvicorn's settings for `app`: `guard`'s limits (defaults without one); X-Forwarded-For
    and X-Forwarded-Proto are believed from `trusted_proxies` (comma-separated addresses or
    networks) only, from nobody without them (uvicorn's default trusts loopback)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        http=guarded_protocol(guard or HttpGuard()),
        proxy_headers=trusted_proxies is not None,
        forwarded_allow_ips=trusted_proxies or "",
    )


def serve_http(
    app: FastAPI,
    listener: socket.socket,
    guard: HttpGuard | None = None,
    trusted_proxies: str | None = None,
) -> None:
    """Serve `app` on the bound `listener` until SIGTERM or SIGINT, behind `guard`."""
    host, port = listener.getsockname()[:2]
    guard = guard or HttpGuard()
    guard.fit_open_files()
    GracefulServer(http_config(app, host, port, guard, trusted_proxies)).run(sockets=[listener])
