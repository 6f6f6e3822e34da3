"""One connection to the brokers, kept up: the lifecycle every broker user of nettel shares.

A `BrokerConnection` (`connection`: STOMP over the network by default, or the `connector` of the
`BrokerAccess`, e.g. an in-memory broker's) does the protocol; `BrokerLink` adds:

- a supervisor thread that connects (the user's CONNECT headers), runs the user's `on_connect`
  step (e.g. SUBSCRIBE) and only then counts as connected;
- disconnect detection: the connection's listener events (`on_disconnected`,
  `on_heartbeat_timeout`), a user's `report_lost` (a failed send), and a check of the
  connection every second, which also drops one whose frame is stuck (`stuck`, `dropped`);
- reconnecting with capped exponential backoff and jitter (`backoff_seconds`);
- the connected state (`connected`, `connection`, `wait_connected`, `disconnected_seconds`) and
  a clean `stop` that returns promptly also while the brokers are away.

Log lines (on the user's logger, named by its `label`): "<label> connected" (with the broker's
`server` header), "<label> connection lost" (warning), "<label> connect failed" (warning, with
the error's kind, its message or the broker's ERROR frame's as `reason` when there is one, and
whether TLS was on).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping

from service.broker.connection import (
    BrokerAccess,
    BrokerConnection,
    BrokerError,
    ConnectionListener,
    TlsFiles,
)
from service.broker.stomp_connection import StompConnection
from service.lifecycle import BackgroundLoop

__all__ = ["BrokerAccess", "BrokerLink", "TlsFiles", "backoff_seconds"]

#: How often a connected link checks its connection, in case its events were missed.
CHECK_SECONDS = 1.0
#: A frame still arriving after this long makes the link count as not connected (`stuck`);
#: after the frame timeout (`BrokerAccess.frame_timeout_seconds`) the connection is dropped and
#: made again: its bytes keep the heart-beat check content, but nothing after the frame can
#: arrive.
FRAME_STUCK_SECONDS = 5.0


def backoff_seconds(failures: int, cap: float) -> float:
    """Capped exponential backoff with jitter: about 0.5 s, 1 s, 2 s, ... up to `cap`."""
    return random.uniform(0.5, 1.0) * min(cap, 0.5 * 2.0 ** min(failures, 10))


class _Watch(ConnectionListener):
    """Tells the link when its connection `connection` is gone."""

    def __init__(self, link: BrokerLink, connection: BrokerConnection) -> None:
        self._link = link
        self._connection = connection

    def on_disconnected(self) -> None:
        self._link.report_lost(self._connection)

    def on_heartbeat_timeout(self) -> None:
        self._link.report_lost(self._connection)


class BrokerLink:
    """Keeps one connection to the first reachable of the access's brokers from a supervisor
    thread.

    `listener` gets the connection's frames (its `on_message` runs on the connection's receiving
    thread); `on_connect(connection)` runs after each CONNECT (the broker's CONNECTED frame is
    in, `connection.server` names the broker), before the link counts as connected: a
    BrokerError or OSError from it fails the attempt, logged with its message as `reason`.
    """

    def __init__(
        self,
        access: BrokerAccess,
        *,
        connect_headers: Mapping[str, str] | None = None,
        listener: ConnectionListener | None = None,
        on_connect: Callable[[BrokerConnection], object] | None = None,
        max_backoff_seconds: float = 5.0,
        label: str = "broker",
        log: logging.Logger | None = None,
        log_extra: Mapping[str, object] | None = None,
    ) -> None:
        self._access = access
        self._connector = access.connector or StompConnection
        self._connect_headers = dict(connect_headers or {})
        self._listener = listener
        self._on_connect = on_connect
        self._max_backoff = max_backoff_seconds
        self._label = label
        self._log = log or logging.getLogger("nettel.broker")
        self._log_extra = dict(log_extra or {})
        self._lock = threading.Lock()  # the connection and the time accounting
        self._connection: BrokerConnection | None = None  # the newest, until closed
        self._up = threading.Event()
        self._down_since: float | None = time.monotonic()
        self._down_total = 0.0
        self._connections = 0
        self._failures = 0  # connect attempts failed in a row
        #: Connections this link dropped itself, by reason (`frame_timeout`).
        self.dropped: dict[str, int] = {}
        #: Frames longer than the receive bound, delivered cut (connections closed before).
        self._frames_cut_before = 0
        self._loop = BackgroundLoop(f"{label.replace(' ', '-')}-link", self._supervise)

    @property
    def connected(self) -> bool:
        return self._up.is_set()

    @property
    def stuck(self) -> bool:
        """Connected, but a frame has been arriving for over FRAME_STUCK_SECONDS (or half the
        frame timeout, if shorter): nothing after it can be received meanwhile."""
        connection = self.connection
        limit = min(FRAME_STUCK_SECONDS, self._access.frame_timeout_seconds / 2)
        return connection is not None and connection.frame_seconds() > limit

    @property
    def frames_cut(self) -> int:
        """Frames longer than the receive bound, kept only in part, since creation."""
        connection = self._connection
        current = 0 if connection is None else connection.frames_cut
        return self._frames_cut_before + current

    @property
    def connection(self) -> BrokerConnection | None:
        """The connection while connected; None otherwise."""
        connection = self._connection
        return connection if self._up.is_set() else None

    def wait_connected(self, timeout: float) -> BrokerConnection | None:
        """The connection, once connected within `timeout` seconds; None if still down."""
        self._up.wait(timeout)
        return self.connection

    @property
    def connections(self) -> int:
        """Connections made since creation: 1 while the first one holds, more after each loss."""
        return self._connections

    def disconnected_seconds(self) -> float:
        """Total time without a broker connection since creation (including now, if down)."""
        with self._lock:
            since = self._down_since
            return self._down_total + (time.monotonic() - since if since is not None else 0.0)

    def report_lost(self, connection: BrokerConnection) -> None:
        """`connection` is unusable (dropped, heart-beats missed, a send failed): reconnect,
        unless it is no longer the link's current connection."""
        with self._lock:
            if connection is not self._connection or not self._up.is_set():
                return
            self._mark_down()
        self._log.warning(f"{self._label} connection lost", extra=self._log_extra)
        self._loop.wake()

    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop reconnecting and disconnect; waits at most `timeout` for an attempt under way."""
        self._loop.stop(timeout)
        self._close()

    def _supervise(self) -> None:
        """The supervisor's step: connect when down (backing off after failures), else check."""
        if not self._up.is_set():
            self._failures = 0 if self._connect() else self._failures + 1
        elif (connection := self._connection) is not None and not connection.is_connected():
            self.report_lost(connection)  # gone without a word from its listener events
            self._loop.pause_next(0)
            return
        elif connection is not None and self._frame_overdue(connection):
            self._loop.pause_next(0)
            return
        failures = self._failures
        pause = backoff_seconds(failures, self._max_backoff) if failures else CHECK_SECONDS
        self._loop.pause_next(pause)

    def _frame_overdue(self, connection: BrokerConnection) -> bool:
        """Drop `connection` (counted, logged, reconnected) when a frame has been arriving for
        longer than the frame timeout."""
        seconds = connection.frame_seconds()
        timeout = self._access.frame_timeout_seconds
        if seconds <= timeout:
            return False
        reason = "frame_timeout"
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        self._log.warning(
            f"{self._label} connection dropped: a frame did not end in time",
            extra=self._log_extra
            | {"reason": reason, "seconds": round(seconds, 1), "timeout": timeout},
        )
        connection.drop(reason)
        self.report_lost(connection)
        return True

    def _connect(self) -> bool:
        self._close()
        connection = self._connector(self._access)
        connection.add_listener("broker-link", _Watch(self, connection))
        if self._listener is not None:
            connection.add_listener(self._label, self._listener)
        try:
            connection.connect(self._connect_headers)
            if self._on_connect is not None:
                self._on_connect(connection)
        except (BrokerError, OSError) as error:
            connection.disconnect()
            kind = error.kind if isinstance(error, BrokerError) else type(error).__name__
            reason = {"reason": text} if (text := str(error)) else {}
            self._log.warning(
                f"{self._label} connect failed",
                extra={"error": kind, "tls": self._access.tls is not None, **reason},
            )
            return False
        with self._lock:
            stopped = self._loop.stopping  # stop() gave up waiting for this attempt
            if not stopped:
                self._connection = connection
                self._mark_up()
        if stopped:
            connection.disconnect()
            return False
        server = {"server": connection.server}
        self._log.info(f"{self._label} connected", extra=self._log_extra | server)
        return True

    def _mark_up(self) -> None:
        """Count the disconnected time up to now; connected from here (with the lock held)."""
        if self._down_since is not None:
            self._down_total += time.monotonic() - self._down_since
            self._down_since = None
        self._connections += 1
        self._up.set()

    def _mark_down(self) -> None:
        """Count the time from now as disconnected (with the lock held)."""
        if self._up.is_set():
            self._up.clear()
            self._down_since = time.monotonic()

    def _close(self) -> None:
        """Disconnect the current connection, if any."""
        with self._lock:
            self._mark_down()
            connection, self._connection = self._connection, None
        if connection is not None:
            self._frames_cut_before += connection.frames_cut
            connection.disconnect()
