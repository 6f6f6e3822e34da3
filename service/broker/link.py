"""One STOMP connection to the brokers, kept up: the lifecycle every broker user of nettel shares.

stomp.py does the protocol (STOMP 1.2, heart-beats, failover over the broker list on connect),
over `stomp_transport.BufferedConnection12` (its leaner receive path). `BrokerLink` adds:

- a supervisor thread that connects (credentials, the user's CONNECT headers, vhost, TLS),
  runs the user's `on_connect` step (e.g. SUBSCRIBE) and only then counts as connected;
- disconnect detection: stomp.py's listener events (`on_disconnected`, `on_heartbeat_timeout`),
  a user's `report_lost` (a failed send), and a check of the socket every second;
- reconnecting with capped exponential backoff and jitter (`backoff_seconds`);
- the connected state (`connected`, `connection`, `wait_connected`, `disconnected_seconds`) and
  a clean `stop` that returns promptly also while the brokers are away.

Log lines (on the user's logger, named by its `label`): "<label> connected" (with the broker's
`server` header), "<label> connection lost" (warning), "<label> connect failed" (warning, with
the error's type, its message or else the broker's ERROR frame's as `reason` when there is
one, and whether TLS was on).

With `tls` every broker is reached over TLS (ActiveMQ's ``stomp+ssl`` connector, RabbitMQ's
``stomp.listeners.ssl``): the broker's certificate must chain to the given CA file (or to the
system's CAs) and name the host as it is written in the broker list; a client certificate is
presented when one is given. The passcode is only ever sent in the CONNECT frame and never
logged.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import stomp
from stomp.exception import StompException

from service.broker.stomp_transport import BufferedConnection12
from service.config import Address
from service.lifecycle import BackgroundLoop

#: How often a connected link checks its socket, in case stomp.py's events were missed.
CHECK_SECONDS = 1.0
#: A frame still arriving after this long makes the link count as not connected (`stuck`)...
FRAME_STUCK_SECONDS = 5.0
#: ...and after this long (without heart-beats; with them, the heart-beat grace,
#: `heartbeat_ms` x `heartbeat_tolerance`) the connection is dropped and made again: its bytes
#: keep stomp.py's heart-beat check content, but nothing after the frame can arrive.
FRAME_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for TLS to the brokers; `ca_file=None` trusts the system's CAs."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None


@dataclass(frozen=True)
class BrokerAccess:
    """Where and how every connection of nettel reaches the brokers (one place for all users).

    `brokers` is the failover list; `vhost` the CONNECT frame's `host` header (stomp.py's
    default: the broker's host name); `tls` None for plain TCP. Heart-beats go both ways every
    `heartbeat_ms` (0: none); `heartbeat_tolerance` is the grace the STOMP spec asks receivers
    to allow, on both sides (`heartbeat_header`).
    """

    brokers: Sequence[Address]
    user: str | None = None
    passcode: str | None = field(default=None, repr=False)
    heartbeat_ms: int = 10_000
    heartbeat_tolerance: float = 3.0
    tls: TlsFiles | None = None
    vhost: str | None = None

    @property
    def frame_timeout_seconds(self) -> float:
        """How long one frame may take to arrive before its connection is dropped."""
        if not self.heartbeat_ms:
            return FRAME_TIMEOUT_SECONDS
        return self.heartbeat_ms * self.heartbeat_tolerance / 1000


def heartbeat_header(heartbeat_ms: int, tolerance: float) -> tuple[int, int]:
    """The CONNECT frame's `heart-beat` (cx, cy): a beat is sent every `heartbeat_ms` but only
    one every `tolerance` periods is promised, so the broker, which closes a connection silent
    for about cx, waits out a stall of this process; cy asks the broker for one every period,
    and the connection counts as lost after `tolerance` of those without a byte.

    >>> heartbeat_header(10_000, 3.0), heartbeat_header(0, 3.0)
    ((30000, 10000), (0, 0))
    """
    return round(heartbeat_ms * tolerance), heartbeat_ms


def backoff_seconds(failures: int, cap: float) -> float:
    """Capped exponential backoff with jitter: about 0.5 s, 1 s, 2 s, ... up to `cap`."""
    return random.uniform(0.5, 1.0) * min(cap, 0.5 * 2.0 ** min(failures, 10))


class _Watch(stomp.ConnectionListener):
    """Tells the link when its connection `connection` is gone."""

    def __init__(self, link: BrokerLink, connection: BufferedConnection12) -> None:
        self._link = link
        self._connection = connection
        self.refusal: str | None = None  # the message of the broker's last ERROR frame

    def on_error(self, frame: stomp.utils.Frame) -> None:
        self.refusal = frame.headers.get("message") or None

    def on_disconnected(self) -> None:
        self._link.report_lost(self._connection)

    def on_heartbeat_timeout(self) -> None:
        self._link.report_lost(self._connection)


class BrokerLink:
    """Keeps one connection to the first reachable of `brokers` from a supervisor thread.

    `listener` gets the connection's frames (its `on_message` runs on stomp.py's receiver
    thread); `on_connect(connection)` runs after each CONNECT (the broker's CONNECTED frame is
    in, `connection.server` names the broker), before the link counts as connected: a
    StompException or OSError from it fails the attempt, logged with its message as `reason`.
    """

    def __init__(
        self,
        access: BrokerAccess,
        *,
        connect_headers: Mapping[str, str] | None = None,
        listener: stomp.ConnectionListener | None = None,
        on_connect: Callable[[BufferedConnection12], object] | None = None,
        max_backoff_seconds: float = 5.0,
        label: str = "broker",
        log: logging.Logger | None = None,
        log_extra: Mapping[str, object] | None = None,
    ) -> None:
        self._access = access
        self._brokers = list(access.brokers)
        self._tls = access.tls
        self._connect_headers = dict(connect_headers or {})
        self._listener = listener
        self._on_connect = on_connect
        self._max_backoff = max_backoff_seconds
        self._label = label
        self._log = log or logging.getLogger("nettel.broker")
        self._log_extra = dict(log_extra or {})
        self._lock = threading.Lock()  # the connection and the time accounting
        self._connection: BufferedConnection12 | None = None  # the newest, until closed
        self._up = threading.Event()
        self._down_since: float | None = time.monotonic()
        self._down_total = 0.0
        self._connections = 0
        self._failures = 0  # connect attempts failed in a row
        #: Connections this link dropped itself, by reason (`frame_timeout`).
        self.dropped: dict[str, int] = {}
        #: Frames longer than the transport's bound, delivered cut (connections closed before).
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
        return connection is not None and connection.transport.frame_seconds() > limit

    @property
    def frames_cut(self) -> int:
        """Frames longer than the transport's bound, kept only in part, since creation."""
        connection = self._connection
        current = 0 if connection is None else connection.transport.frames.frames_cut
        return self._frames_cut_before + current

    @property
    def connection(self) -> BufferedConnection12 | None:
        """The connection while connected; None otherwise."""
        connection = self._connection
        return connection if self._up.is_set() else None

    def wait_connected(self, timeout: float) -> BufferedConnection12 | None:
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

    def report_lost(self, connection: BufferedConnection12) -> None:
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
            self.report_lost(connection)  # gone without a word from stomp.py
            self._loop.pause_next(0)
            return
        elif connection is not None and self._frame_overdue(connection):
            self._loop.pause_next(0)
            return
        failures = self._failures
        pause = backoff_seconds(failures, self._max_backoff) if failures else CHECK_SECONDS
        self._loop.pause_next(pause)

    def _frame_overdue(self, connection: BufferedConnection12) -> bool:
        """Drop `connection` (counted, logged, reconnected) when a frame has been arriving for
        longer than the frame timeout."""
        seconds = connection.transport.frame_seconds()
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
        connection.transport.drop(reason)
        self.report_lost(connection)
        return True

    def _connect(self) -> bool:
        self._close()
        access = self._access
        connection = BufferedConnection12(
            self._brokers,
            heartbeats=heartbeat_header(access.heartbeat_ms, access.heartbeat_tolerance),
            heart_beat_receive_scale=access.heartbeat_tolerance,
            send_every_ms=access.heartbeat_ms,
            reconnect_attempts_max=1,
            vhost=access.vhost,
        )
        watch = _Watch(self, connection)
        connection.set_listener("broker-link", watch)
        if self._listener is not None:
            connection.set_listener(self._label, self._listener)
        if self._tls is not None:
            connection.set_ssl(
                for_hosts=self._brokers,
                key_file=self._tls.key_file,
                cert_file=self._tls.cert_file,
                ca_certs=self._tls.ca_file,
            )
        try:
            connection.connect(
                access.user, access.passcode, wait=True, headers=self._connect_headers
            )
            if self._on_connect is not None:
                self._on_connect(connection)
        except (StompException, OSError) as error:
            _disconnect_quietly(connection)
            text = str(error) or watch.refusal  # e.g. ActiveMQ: client id already connected
            reason = {"reason": text} if text else {}
            self._log.warning(
                f"{self._label} connect failed",
                extra={"error": type(error).__name__, "tls": self._tls is not None, **reason},
            )
            return False
        with self._lock:
            stopped = self._loop.stopping  # stop() gave up waiting for this attempt
            if not stopped:
                self._connection = connection
                self._mark_up()
        if stopped:
            _disconnect_quietly(connection)
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
            self._frames_cut_before += connection.transport.frames.frames_cut
            _disconnect_quietly(connection)


def _disconnect_quietly(connection: BufferedConnection12) -> None:
    try:
        connection.disconnect()
    except (StompException, OSError):
        pass
