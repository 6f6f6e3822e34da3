"""A private RabbitMQ node with its STOMP plugin, for tests and benchmarks (Debian's package).

Like `devtools.activemq`, everything the node writes lives under one base directory and it
listens on private ports only, beside whatever system node runs (Debian starts one on 5672)::

    base_dir/
        rabbitmq.conf            generated: AMQP and STOMP on 127.0.0.1, the default vhost
        enabled_plugins          generated: [rabbitmq_stomp].
        rabbitmq-env.conf        empty, so /etc/rabbitmq/rabbitmq-env.conf is not read
        mnesia/                  queues and persistent messages (survive stop, kill, restart)
        .erlang.cookie           the node's own cookie ($HOME is the base directory)
        rabbitmq.log             the node's log and console output of every start, appended
        tls/                     with `tls=generate_test_pki(...)`: the test CA, PEM key pair

Use from Python (`start_rabbitmq` waits until a real STOMP CONNECT succeeds)::

    broker = start_rabbitmq(Path("run/rabbitmq"), stomp_port=61613)
    broker.kill(); broker.start()        # fault test: same node, dir and ports, data kept
    broker.stop()

or `python -m devtools.rabbitmq start --dir run/rabbitmq --port 61613` in the foreground.

The node runs `rabbitmq-server` (a shell that runs the Erlang VM) in its own process group,
asked to get SIGTERM when the thread that started it dies. It registers with the machine's
`epmd` (starting one if none runs, which then stays) under a unique node name; Erlang
distribution listens on 127.0.0.1 only. The node has RabbitMQ's default user guest/guest, who
may log in from the loopback interface, and one vhost: `/`, or the `vhost` given.

With `tls=generate_test_pki(folder)` (devtools.activemq: made with keytool, exported to PEM
with openssl) the node also takes STOMP over TLS on `ssl_port` (`broker.ssl_brokers`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from devtools.activemq import (
    LOOPBACK,
    BrokerStartError,
    BrokerTls,
    _die_with_parent,
    free_port,
    generate_test_pki,
    port_is_free,
    read_log_tail,
    stomp_handshake_ok,
)

RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
INSTALL_HINT = "install Debian's broker package: apt-get install -y rabbitmq-server"
LOG_FILE = "rabbitmq.log"


def build_rabbitmq_conf(
    stomp_port: int,
    amqp_port: int,
    vhost: str = "/",
    *,
    ssl_port: int | None = None,
    tls_files: tuple[Path, Path, Path] | None = None,
) -> str:
    """The node's rabbitmq.conf: listeners on 127.0.0.1, `vhost` as the only (default) vhost;
    with `ssl_port` and `tls_files` (CA, certificate, key as PEM) also STOMP over TLS.

    >>> print(build_rabbitmq_conf(61613, 5673))
    listeners.tcp.1 = 127.0.0.1:5673
    stomp.listeners.tcp.1 = 127.0.0.1:61613
    default_vhost = /
    stomp.default_vhost = /
    <BLANKLINE>
    """
    if (ssl_port is None) != (tls_files is None):
        raise ValueError("ssl_port and tls_files go together")
    lines = [
        f"listeners.tcp.1 = {LOOPBACK}:{amqp_port}",
        f"stomp.listeners.tcp.1 = {LOOPBACK}:{stomp_port}",
        f"default_vhost = {vhost}",
        f"stomp.default_vhost = {vhost}",
    ]
    if ssl_port is not None and tls_files is not None:
        ca, cert, key = tls_files
        lines += [
            f"stomp.listeners.ssl.1 = {LOOPBACK}:{ssl_port}",
            f"ssl_options.cacertfile = {ca}",
            f"ssl_options.certfile = {cert}",
            f"ssl_options.keyfile = {key}",
            "ssl_options.verify = verify_none",
            "ssl_options.fail_if_no_peer_cert = false",
        ]
    return "\n".join(lines) + "\n"


def export_pem_key_pair(tls: BrokerTls) -> tuple[Path, Path]:
    """The broker's certificate and unencrypted key from `tls`'s key store, as PEM files."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise BrokerStartError("STOMP over TLS on RabbitMQ needs the `openssl` command")
    cert, key = tls.folder / "broker.crt.pem", tls.folder / "broker.key.pem"
    password = f"pass:{tls.password}"
    for what, out in (("-nokeys", cert), ("-nocerts", key)):
        command = [openssl, "pkcs12", "-in", str(tls.keystore), what, "-nodes", "-out", str(out)]
        done = subprocess.run(
            [*command, "-passin", password], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise BrokerStartError(f"openssl pkcs12 failed: {done.stderr[-500:]}")
    return cert, key


class RabbitMQProcess:
    """A running (or stopped) private node; `start` again brings it back with its data."""

    flavour = "rabbitmq"

    def __init__(
        self,
        base_dir: Path,
        stomp_port: int,
        amqp_port: int,
        dist_port: int,
        vhost: str = "/",
        tls: BrokerTls | None = None,
        ssl_port: int | None = None,
    ) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.stomp_port = stomp_port
        self.amqp_port = amqp_port
        self.dist_port = dist_port
        self.vhost = vhost
        self.tls = tls
        self.ssl_port = ssl_port
        self.node_name = f"nettel-{os.getpid()}-{stomp_port}@localhost"
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def log_path(self) -> Path:
        return self.base_dir / LOG_FILE

    @property
    def brokers(self) -> str:
        """The `host:port` string for `nettel --brokers`."""
        return f"{LOOPBACK}:{self.stomp_port}"

    @property
    def ssl_brokers(self) -> str:
        """The `host:port` of the STOMP-over-TLS listener."""
        if self.ssl_port is None:
            raise BrokerStartError("this node has no TLS listener (start it with tls=)")
        return f"{LOOPBACK}:{self.ssl_port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 60) -> None:
        """Launch the node and return once it answers a STOMP CONNECT; raise otherwise."""
        if self.is_running():
            raise BrokerStartError(f"node already running as pid {self.pid}")
        if not RABBITMQ_SERVER.exists():
            raise BrokerStartError(f"{RABBITMQ_SERVER} not found; {INSTALL_HINT}")
        self._check_ports_free()
        self._write_files()
        began = time.monotonic()
        self.process = self._launch()
        try:
            self._wait_until_ready(began + timeout)
        except BaseException:
            self.kill()
            raise
        self.startup_seconds = time.monotonic() - began

    def restart(self, timeout: float = 60) -> None:
        """Stop the node if it runs, then start it again; durable queues and persistent
        messages are kept."""
        self.stop()
        self.start(timeout)

    def stop(self, timeout: float = 30) -> int | None:
        """Shut down cleanly (SIGTERM), SIGKILL after `timeout`; return the exit code."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self._signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()
        self._wait_group_gone()
        return code

    def kill(self) -> int | None:
        """SIGKILL the node at once (a crash, for fault tests) and reap it."""
        if self.process is None:
            return None
        self._signal(signal.SIGKILL)  # the Erlang VM too, should the shell be gone already
        code = self.process.wait()
        self._wait_group_gone()
        return code

    def __enter__(self) -> RabbitMQProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"<RabbitMQProcess stomp={self.brokers} {state} dir={self.base_dir}>"

    def environment(self) -> dict[str, str]:
        """rabbitmq-server's environment: every path under the base dir, private ports."""
        base = self.base_dir
        return os.environ | {
            "HOME": str(base),
            "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_LOGS": "-",  # to stdout, which goes to rabbitmq.log
            "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
            "RABBITMQ_NODENAME": self.node_name,
            "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }

    def _write_files(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        tls_files = None
        if self.tls is not None:
            tls_files = (self.tls.ca_file, *export_pem_key_pair(self.tls))
        conf = build_rabbitmq_conf(
            self.stomp_port, self.amqp_port, self.vhost, ssl_port=self.ssl_port, tls_files=tls_files
        )
        (self.base_dir / "rabbitmq.conf").write_text(conf)
        (self.base_dir / "enabled_plugins").write_text("[rabbitmq_stomp].\n")
        (self.base_dir / "rabbitmq-env.conf").write_text("")

    def _launch(self) -> subprocess.Popen[bytes]:
        with self.log_path.open("ab") as log:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            log.write(f"\n=== {stamp} nettel devtools starting {self.node_name}\n".encode())
            log.flush()
            return subprocess.Popen(
                [str(RABBITMQ_SERVER)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
                env=self.environment(),
                start_new_session=True,
                preexec_fn=_die_with_parent,  # only calls prctl, safe after fork
            )

    def _signal(self, signum: signal.Signals) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass

    def _wait_group_gone(self, timeout: float = 10.0) -> None:
        """Wait until the VM, which the shell does not reap when killed, has exited too, so
        its ports are free for the next start."""
        deadline = time.monotonic() + timeout
        while self.process is not None and time.monotonic() < deadline:
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def _check_ports_free(self) -> None:
        ports = [("STOMP", self.stomp_port), ("AMQP", self.amqp_port)]
        ports += [("Erlang distribution", self.dist_port)]
        if self.ssl_port is not None:
            ports.append(("STOMP+TLS", self.ssl_port))
        for name, port in ports:
            if not port_is_free(port):
                raise BrokerStartError(
                    f"{name} port {port} is already in use on {LOOPBACK}; stop whatever "
                    f"listens there (`ss -ltnp 'sport = :{port}'`) or choose another port"
                )

    def _wait_until_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise self._start_error(f"node exited with code {self.process.returncode}")
            ready = not port_is_free(self.stomp_port) and (
                self.ssl_port is None or not port_is_free(self.ssl_port)
            )
            if ready and stomp_handshake_ok(self.stomp_port, vhost=self.vhost):
                return
            time.sleep(0.2)
        raise self._start_error("node did not accept a STOMP CONNECT in time")

    def _start_error(self, what: str) -> BrokerStartError:
        tail = read_log_tail(self.log_path)
        return BrokerStartError(f"{what} (stomp port {self.stomp_port}); {self.log_path}:\n{tail}")


def start_rabbitmq(
    base_dir: Path,
    stomp_port: int = 61613,
    timeout: float = 60,
    *,
    vhost: str = "/",
    tls: BrokerTls | None = None,
    ssl_port: int | None = None,
) -> RabbitMQProcess:
    """Start a private node under `base_dir` and return it once STOMP CONNECT works.

    AMQP and Erlang distribution get free ports (kept for `start` after `kill`); `tls` (from
    `devtools.activemq.generate_test_pki`) adds STOMP over TLS on `ssl_port` (None: a free
    port). Raises `BrokerStartError` when a port is taken, the package is missing, the node
    exits, or it is not ready within `timeout` seconds.
    """
    broker = RabbitMQProcess(
        base_dir,
        stomp_port=stomp_port,
        amqp_port=free_port(),
        dist_port=free_port(),
        vhost=vhost,
        tls=tls,
        ssl_port=free_port() if tls is not None and ssl_port is None else ssl_port,
    )
    broker.start(timeout)
    return broker


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.rabbitmq",
        description="Run a private RabbitMQ node with STOMP (Debian package) in the foreground.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start the node; Ctrl-C or SIGTERM stops it")
    start.add_argument("--dir", type=Path, default=Path("run/rabbitmq"), help="instance folder")
    start.add_argument("--port", type=int, default=61613, help="STOMP port on 127.0.0.1")
    start.add_argument("--vhost", default="/", help="the node's (default) vhost")
    start.add_argument("--timeout", type=float, default=60, help="seconds to wait for STOMP")
    start.add_argument(
        "--tls-port", type=int, default=None, help="also STOMP over TLS, test CA under DIR/tls"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stop_requested = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop_requested.set())
    try:
        tls = generate_test_pki(args.dir / "tls") if args.tls_port else None
        broker = start_rabbitmq(
            args.dir, args.port, args.timeout, vhost=args.vhost, tls=tls, ssl_port=args.tls_port
        )
    except BrokerStartError as error:
        print(f"rabbitmq: {error}", file=sys.stderr)
        return 2
    print(
        f"rabbitmq: ready on stomp://{broker.brokers} vhost {broker.vhost!r} (pid {broker.pid}) "
        f"in {broker.startup_seconds:.1f} s; log {broker.log_path}",
        flush=True,
    )
    if tls is not None:
        print(f"rabbitmq: STOMP over TLS on {broker.ssl_brokers}, CA {tls.ca_file}", flush=True)
    while not stop_requested.wait(0.5):
        if not broker.is_running():
            print(f"rabbitmq: node exited; log tail:\n{read_log_tail(broker.log_path)}")
            return 1
    print(f"rabbitmq: stopped (exit code {broker.stop()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
