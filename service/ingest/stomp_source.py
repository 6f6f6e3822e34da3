"""STOMP adapter: keeps a subscription on one of the configured brokers and feeds frames on.

stomp.py does the protocol (STOMP 1.2, heart-beats, failover over the host list on connect);
this module adds a supervisor thread that reconnects with capped exponential backoff and jitter
whenever the connection drops.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence

import stomp
from stomp.exception import StompException

Address = tuple[str, int]
FrameHandler = Callable[[str, bytes], object]


class _Listener(stomp.ConnectionListener):
    def __init__(self, source: StompSource) -> None:
        self._source = source

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self._source.deliver(frame.headers.get("destination", ""), frame.body)

    def on_disconnected(self) -> None:
        self._source.mark_disconnected()

    def on_heartbeat_timeout(self) -> None:
        self._source.mark_disconnected()


class StompSource:
    """Subscribes to `topics`; calls `handler(destination, body)` on stomp.py's receiver thread."""

    def __init__(
        self,
        brokers: Sequence[Address],
        topics: Sequence[str],
        handler: FrameHandler,
        *,
        user: str | None = None,
        passcode: str | None = None,
        heartbeat_ms: int = 10_000,
        max_backoff_seconds: float = 30.0,
        log: logging.Logger | None = None,
    ) -> None:
        self._brokers = list(brokers)
        self._topics = list(topics)
        self._handler = handler
        self._credentials = (user, passcode)
        self._heartbeat_ms = heartbeat_ms
        self._max_backoff = max_backoff_seconds
        self._log = log or logging.getLogger("nettel.stomp")
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._connected = threading.Event()
        self._connection: stomp.Connection12 | None = None
        self._thread = threading.Thread(
            target=self._supervise, name="stomp-supervisor", daemon=True
        )

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        self._disconnect()

    def deliver(self, destination: str, body: bytes | str) -> None:
        try:
            self._handler(destination, body if isinstance(body, bytes) else body.encode())
        except Exception:  # the consumer must outlive any bug in a handler
            self._log.exception("frame handler failed", extra={"destination": destination})

    def mark_disconnected(self) -> None:
        if self._connected.is_set():
            self._log.warning("broker connection lost")
        self._connected.clear()
        self._wake.set()

    def _supervise(self) -> None:
        failures = 0
        while not self._stop.is_set():
            if not self._connected.is_set():
                failures = 0 if self._try_connect() else failures + 1
            self._wake.clear()
            self._wake.wait(self._backoff(failures) if failures else 1.0)

    def _backoff(self, failures: int) -> float:
        """Capped exponential backoff with full jitter."""
        return random.uniform(0.5, 1.0) * min(self._max_backoff, 0.5 * 2 ** min(failures, 10))

    def _try_connect(self) -> bool:
        self._disconnect()
        connection = stomp.Connection12(
            self._brokers,
            heartbeats=(self._heartbeat_ms, self._heartbeat_ms),
            reconnect_attempts_max=1,
            auto_decode=False,
        )
        connection.set_listener("nettel", _Listener(self))
        user, passcode = self._credentials
        try:
            connection.connect(user, passcode, wait=True)
            for number, topic in enumerate(self._topics):
                connection.subscribe(topic, id=str(number), ack="auto")
        except (StompException, OSError) as error:
            self._log.warning("broker connect failed", extra={"error": type(error).__name__})
            return False
        self._connection = connection
        self._connected.set()
        self._log.info("broker connected", extra={"topics": self._topics})
        return True

    def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        self._connected.clear()
        if connection is not None:
            try:
                connection.disconnect()
            except (StompException, OSError):
                pass
