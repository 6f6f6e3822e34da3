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
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from devtools.activemq import BrokerTls, generate_test_pki
from devtools.broker_process import (
    LOOPBACK,
    BrokerProcess,
    BrokerStartError,
    build_start_parser,
    free_port,
    run_in_foreground,
    ssl_port_for,
)

RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
RABBITMQCTL = RABBITMQ_SERVER.with_name("rabbitmqctl")
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


class RabbitMQProcess(BrokerProcess):
    """A running (or stopped) private node; `start` again brings it back with its data."""

    flavour = "rabbitmq"
    log_name = LOG_FILE
    noun = "node"
    ssl_port_name = "STOMP+TLS"
    ssl_listener = "TLS listener"
    poll_interval = 0.2
    group_outlives_process = True  # the Erlang VM, which the shell does not reap when killed
    vhost: str

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
        super().__init__(base_dir, stomp_port, tls, ssl_port)
        self.amqp_port = amqp_port
        self.dist_port = dist_port
        self.vhost = vhost
        self.node_name = f"nettel-{os.getpid()}-{stomp_port}@localhost"

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

    def declare_queue(self, name: str, arguments: Mapping[str, object]) -> None:
        """Declare a durable queue in the node's vhost with `arguments` (such as
        x-single-active-consumer, which STOMP cannot set) by `rabbitmqctl import_definitions`,
        as an operator would; the node finishes the import moments after this returns."""
        queue = {"name": name, "vhost": self.vhost, "durable": True, "auto_delete": False}
        path = self.base_dir / f"definitions-{name}.json"
        path.write_text(json.dumps({"queues": [queue | {"arguments": dict(arguments)}]}))
        command = [str(RABBITMQCTL), "import_definitions", str(path)]
        subprocess.run(command, env=self.environment(), capture_output=True, timeout=60, check=True)

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

    def _command(self) -> list[str]:
        if not RABBITMQ_SERVER.exists():
            raise BrokerStartError(f"{RABBITMQ_SERVER} not found; {INSTALL_HINT}")
        return [str(RABBITMQ_SERVER)]

    def _other_ports(self) -> list[tuple[str, int]]:
        return [("AMQP", self.amqp_port), ("Erlang distribution", self.dist_port)]

    def _start_note(self, command: list[str]) -> str:
        return f" {self.node_name}"


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
        ssl_port=ssl_port_for(tls, ssl_port),
    )
    broker.start(timeout)
    return broker


def build_parser() -> argparse.ArgumentParser:
    parser, start = build_start_parser(
        "rabbitmq",
        "Run a private RabbitMQ node with STOMP (Debian package) in the foreground.",
        "node",
    )
    start.add_argument("--vhost", default="/", help="the node's (default) vhost")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def start() -> RabbitMQProcess:
        tls = generate_test_pki(args.dir / "tls") if args.tls_port else None
        return start_rabbitmq(
            args.dir, args.port, args.timeout, vhost=args.vhost, tls=tls, ssl_port=args.tls_port
        )

    def ready_lines(broker: RabbitMQProcess) -> list[str]:
        lines = [
            f"ready on stomp://{broker.brokers} vhost {broker.vhost!r} (pid {broker.pid}) "
            f"in {broker.startup_seconds:.1f} s; log {broker.log_path}"
        ]
        if broker.tls is not None:
            lines.append(f"STOMP over TLS on {broker.ssl_brokers}, CA {broker.tls.ca_file}")
        return lines

    return run_in_foreground("rabbitmq", start, ready_lines)


if __name__ == "__main__":
    sys.exit(main())
