"""A STOMP peer that answers CONNECT and SUBSCRIBE, then sends what a test scripts: a hostile
broker (or whatever sits between nettel and its broker) for the receive path's limits."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class HostileBroker:
    """Listens on 127.0.0.1; for the n-th connection (from 0) runs `script(n, sock)` once the
    client's CONNECT came and CONNECTED (no heart-beats) went back."""

    def __init__(self, script: Callable[[int, socket.socket], None]) -> None:
        self._script = script
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.connections = 0
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            number, self.connections = self.connections, self.connections + 1
            threading.Thread(target=self._serve, args=(number, sock), daemon=True).start()

    def _serve(self, number: int, sock: socket.socket) -> None:
        try:
            received = b""
            while b"\x00" not in received:  # CONNECT
                chunk = sock.recv(65536)
                if not chunk:
                    return
                received += chunk
            sock.sendall(b"CONNECTED\nversion:1.2\nheart-beat:0,0\nserver:ActiveMQ/5.17.2\n\n\x00")
            self._script(number, sock)
        except OSError:
            pass
        finally:
            sock.close()

    def hold_open(self) -> None:
        """Keep a script's connection open, saying nothing more, until the broker is closed."""
        self._closed.wait(60)

    def close(self) -> None:
        self._closed.set()
        self._server.close()


def receipts(sock: socket.socket, received: bytes = b"") -> bytes:
    """Answer every RECEIPT asked for in frames read until the last one held `receipt:`."""
    while b"receipt:" not in received:
        received += sock.recv(65536)
    for line in received.split(b"\n"):
        if line.startswith(b"receipt:"):
            sock.sendall(b"RECEIPT\nreceipt-id:" + line.removeprefix(b"receipt:") + b"\n\n\x00")
    return received
