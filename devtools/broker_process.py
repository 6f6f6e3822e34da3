"""What the private brokers of `devtools.activemq` and `devtools.rabbitmq` share: ports, the
STOMP readiness check, the TLS material a broker is started with (`BrokerTls`), and
`BrokerProcess`, the lifecycle of a broker run as a child process.

A broker is one child in its own process group (so a Ctrl-C aimed at the parent's group does not
reach it; `stop` does a clean SIGTERM shutdown instead), asked to get SIGTERM when the thread that
started it dies, so a killed test run leaves no broker behind. Its console output is appended to
`log_path`; `start` returns once a real STOMP CONNECT succeeds. Subclasses say how the broker is
configured and launched (`_command`, `_write_files`, `environment`) and which ports it needs.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Self, TypeVar

import stomp

LOOPBACK = "127.0.0.1"


class BrokerStartError(RuntimeError):
    """The broker could not be started; the message says why and quotes the broker log."""


@dataclass(frozen=True)
class BrokerTls:
    """A throw-away PKI for a `stomp+ssl` connector, as `devtools.activemq.generate_test_pki`
    makes it for either broker; every file lives in one folder.

    `ca_file` is the CA certificate (PEM) clients trust; the broker's key store holds its key
    and a certificate for its host signed by that CA. With a trust store (the CA) the broker asks
    every client for a certificate signed by the CA (`devtools.activemq.issue_client_certificate`).
    """

    folder: Path
    ca_file: Path
    keystore: Path
    truststore: Path | None
    password: str

    @property
    def need_client_auth(self) -> bool:
        return self.truststore is not None


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PICKED_PORT = 10000
_handed_out: set[int] = set()


def ephemeral_port_floor() -> int:
    """The lowest port the kernel hands to outgoing connections (32768 if it cannot be read)."""
    try:
        return int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = LOOPBACK) -> int:
    """Return a free TCP port below the kernel's ephemeral range.

    A port the kernel picks (`bind(0)`) lies in the ephemeral range, which every outgoing
    connection of every test worker also draws from: in the seconds a broker takes to bind it, a
    client socket could take it (seen in CI as ActiveMQ's "Address already in use"). Ports below
    that range are only ever taken by a listener that asked for them. Random, so that parallel
    test workers rarely pick the same one; never the same port twice in one process.
    """
    rng = random.SystemRandom()
    ceiling = ephemeral_port_floor()
    for _ in range(1000):
        port = rng.randrange(LOWEST_PICKED_PORT, ceiling)
        if port not in _handed_out and port_is_free(port, host):
            _handed_out.add(port)
            return port
    raise OSError(f"no free TCP port found in {LOWEST_PICKED_PORT}-{ceiling - 1} on {host}")


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True when nothing listens on `port` (a listener on any address blocks the bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def ssl_port_for(tls: BrokerTls | None, ssl_port: int | None) -> int | None:
    """The TLS port a broker started with `tls` gets: `ssl_port`, or a free one if None."""
    return free_port() if tls is not None and ssl_port is None else ssl_port


def read_log_tail(path: Path, lines: int = 40) -> str:
    """Return the last `lines` lines of a log file, or a note that there is none."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"(no log at {path})"


def stomp_handshake_ok(
    port: int, timeout: float = 2.0, host: str = LOOPBACK, vhost: str | None = None
) -> bool:
    """True when a STOMP CONNECT to `host:port` (with `vhost` as its `host` header, if given)
    gets a CONNECTED frame within `timeout`."""
    conn = stomp.Connection([(host, port)], reconnect_attempts_max=1, timeout=timeout, vhost=vhost)
    try:
        conn.connect(with_connect_command=True, wait=False)
        deadline = time.monotonic() + timeout
        while not conn.is_connected() and time.monotonic() < deadline:
            time.sleep(0.05)
        return bool(conn.is_connected())
    except (stomp.exception.StompException, OSError):
        return False
    finally:
        _disconnect_quietly(conn)


def _disconnect_quietly(conn: stomp.Connection) -> None:
    try:
        if conn.is_connected():
            conn.disconnect()
        else:
            conn.transport.stop()
    except (stomp.exception.StompException, OSError):
        pass


_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGTERM me when my parent thread dies."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class BrokerProcess:
    """A running (or stopped) private broker; `restart` brings it back on the same dir and ports,
    with its persistent messages."""

    flavour: str
    #: The broker's console output, appended on every start, under `base_dir`.
    log_name: str
    #: What the messages call the broker ("broker", "node").
    noun = "broker"
    #: Names of the TLS port and listener in messages.
    ssl_port_name = "STOMP+SSL"
    ssl_listener = "stomp+ssl connector"
    #: Seconds between readiness checks while starting.
    poll_interval = 0.1
    #: The `host` header of the readiness check's CONNECT (None: none).
    vhost: str | None = None
    #: True when processes of the broker's group may outlive the one started (RabbitMQ's
    #: Erlang VM, which its shell does not reap when killed): `kill` signals the group even when
    #: that process is gone, and `stop` and `kill` wait until the whole group has exited.
    group_outlives_process = False

    def __init__(
        self,
        base_dir: Path,
        stomp_port: int,
        tls: BrokerTls | None = None,
        ssl_port: int | None = None,
    ) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.stomp_port = stomp_port
        self.tls = tls
        self.ssl_port = ssl_port
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def log_path(self) -> Path:
        return self.base_dir / self.log_name

    @property
    def brokers(self) -> str:
        """The `host:port` string for `nettel --brokers`."""
        return f"{LOOPBACK}:{self.stomp_port}"

    @property
    def ssl_brokers(self) -> str:
        """The `host:port` of the STOMP-over-TLS listener, for `nettel --brokers --broker-tls`."""
        if self.ssl_port is None:
            raise BrokerStartError(
                f"this {self.noun} has no {self.ssl_listener} (start it with tls=)"
            )
        return f"{LOOPBACK}:{self.ssl_port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def environment(self) -> dict[str, str] | None:
        """The broker's environment; None: this process's."""
        return None

    def start(self, timeout: float = 60) -> None:
        """Launch the broker and return once it answers a STOMP CONNECT; raise otherwise."""
        if self.is_running():
            raise BrokerStartError(f"{self.noun} already running as pid {self.pid}")
        command = self._command()
        self._check_ports_free()
        self._write_files()
        began = time.monotonic()
        self.process = self._launch(command)
        try:
            self._wait_until_ready(began + timeout)
        except BaseException:
            self.kill()
            raise
        self.startup_seconds = time.monotonic() - began

    def restart(self, timeout: float = 60) -> None:
        """Stop the broker if it runs, then start it again; persistent messages are kept."""
        self.stop()
        self.start(timeout)

    def stop(self, timeout: float = 30) -> int | None:
        """Shut down cleanly (SIGTERM), SIGKILL after `timeout`; return the exit code."""
        if not self.is_running():
            return None if self.process is None else self.process.returncode
        self._signal(signal.SIGTERM)
        try:
            code = self._process().wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()
        self._wait_group_gone()
        return code

    def kill(self) -> int | None:
        """SIGKILL the broker at once (a crash, for fault tests) and reap it."""
        if self.process is None:
            return None
        if self.group_outlives_process or self.process.poll() is None:
            self._signal(signal.SIGKILL)
        code = self.process.wait()
        self._wait_group_gone()
        return code

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"<{type(self).__name__} stomp={self.brokers} {state} dir={self.base_dir}>"

    def _command(self) -> list[str]:
        """The command line that runs the broker in the foreground; raises `BrokerStartError`
        when the broker's package is missing."""
        raise NotImplementedError

    def _write_files(self) -> None:
        """(Re)write the broker's configuration under `base_dir`."""
        raise NotImplementedError

    def _other_ports(self) -> list[tuple[str, int]]:
        """(name, port) of the ports the broker listens on besides STOMP and TLS."""
        return []

    def _start_note(self, command: list[str]) -> str:
        """What the log's line before each start says after "starting"."""
        return f": {' '.join(command)}"

    def _process(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise BrokerStartError(f"{self.noun} was never started")
        return self.process

    def _signal(self, signum: signal.Signals) -> None:
        try:
            os.killpg(self._process().pid, signum)
        except ProcessLookupError:
            pass

    def _wait_group_gone(self, timeout: float = 10.0) -> None:
        """With `group_outlives_process`: wait until every process of the group has exited,
        so its ports are free for the next start."""
        deadline = time.monotonic() + timeout
        while self.group_outlives_process and time.monotonic() < deadline:
            try:
                os.killpg(self._process().pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def _check_ports_free(self) -> None:
        ports = [("STOMP", self.stomp_port), *self._other_ports()]
        if self.ssl_port is not None:
            ports.append((self.ssl_port_name, self.ssl_port))
        for name, port in ports:
            if not port_is_free(port):
                raise BrokerStartError(
                    f"{name} port {port} is already in use on {LOOPBACK}; stop whatever "
                    f"listens there (`ss -ltnp 'sport = :{port}'`) or choose another port"
                )

    def _launch(self, command: list[str]) -> subprocess.Popen[bytes]:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            note = self._start_note(command)
            log.write(f"\n=== {stamp} nettel devtools starting{note}\n".encode())
            log.flush()
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
                env=self.environment(),
                start_new_session=True,
                preexec_fn=_die_with_parent,  # only calls prctl, safe after fork
            )

    def _wait_until_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self._process().poll() is not None:
                what = f"{self.noun} exited with code {self._process().returncode}"
                raise self._start_error(what)
            if self._listening() and stomp_handshake_ok(self.stomp_port, vhost=self.vhost):
                return
            time.sleep(self.poll_interval)
        raise self._start_error(f"{self.noun} did not accept a STOMP CONNECT in time")

    def _listening(self) -> bool:
        """STOMP (and STOMP over TLS, which may start after it) accept connections."""
        ports = [self.stomp_port] if self.ssl_port is None else [self.stomp_port, self.ssl_port]
        return not any(map(port_is_free, ports))

    def _start_error(self, what: str) -> BrokerStartError:
        tail = read_log_tail(self.log_path)
        return BrokerStartError(f"{what} (stomp port {self.stomp_port}); {self.log_path}:\n{tail}")


B = TypeVar("B", bound=BrokerProcess)


def build_start_parser(
    name: str, description: str, noun: str = "broker"
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The parser of `python -m devtools.<name>`, and its `start` command's with the options
    every broker has (--dir, --port, --timeout, --tls-port), for the caller to add its own."""
    parser = argparse.ArgumentParser(prog=f"python -m devtools.{name}", description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help=f"start the {noun}; Ctrl-C or SIGTERM stops it")
    start.add_argument("--dir", type=Path, default=Path(f"run/{name}"), help="instance folder")
    start.add_argument("--port", type=int, default=61613, help="STOMP port on 127.0.0.1")
    start.add_argument("--timeout", type=float, default=60, help="seconds to wait for STOMP")
    start.add_argument(
        "--tls-port",
        type=int,
        default=None,
        help="also STOMP over TLS (stomp+ssl) on this port, with a test CA made under DIR/tls",
    )
    return parser, start


def run_in_foreground(
    name: str, start: Callable[[], B], ready_lines: Callable[[B], list[str]]
) -> int:
    """`python -m devtools.<name> start`: start the broker, print `ready_lines` (each after
    "<name>: "), and run until Ctrl-C or SIGTERM, which stop it cleanly. Exit code 2 when it
    does not start, 1 when it exits by itself."""
    stop_requested = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop_requested.set())
    try:
        broker = start()
    except BrokerStartError as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 2
    for line in ready_lines(broker):
        print(f"{name}: {line}", flush=True)
    while not stop_requested.wait(0.5):
        if not broker.is_running():
            tail = read_log_tail(broker.log_path)
            print(f"{name}: {broker.noun} exited unexpectedly; log tail:\n{tail}", file=sys.stderr)
            return 1
    print(f"{name}: stopping", flush=True)
    code = broker.stop()
    print(f"{name}: stopped (exit code {code})", flush=True)
    return 0
