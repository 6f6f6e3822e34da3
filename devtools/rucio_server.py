"""A private Rucio server (PyPI `rucio`, SQLite, werkzeug) for tests and benchmarks.

Rucio's server pins dependencies that clash with nettel's (stomp.py 8, urllib3 1.26), so it
lives in a venv of its own, `.venv-rucio` beside nettel's `.venv` (`install_server_venv`, which
`scripts/test.sh` runs; idempotent: a stamp names the installed version). Everything one server
writes lives under one base directory, and it listens on a private loopback port::

    base_dir/
        rucio.cfg       generated: server, bootstrap and client sections (RUCIO_CONFIG)
        alembic.ini     generated: the installed package's migrate_repo, logging sections
        rucio.db        SQLite database, built at the first start
        rucio.log       the server's output

Use from Python (`start_rucio_server` bootstraps the database and waits for `GET /ping`)::

    server = start_rucio_server(Path("run/rucio"))
    server.environment()   # RUCIO_CONFIG for Rucio clients: root account, userpass
    server.run_script("setup", spec)    # devtools/rucio_side.py: Rucio's core API
    server.stop()

or `python -m devtools.rucio_server install` / `start --dir run/rucio --port 8090`.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from devtools.activemq import free_port
from devtools.local_http import LOCAL_HTTP

REPO_ROOT = Path(__file__).resolve().parents[1]
RUCIO_SIDE = Path(__file__).with_name("rucio_side.py")
RUCIO_VERSION = "41.5.1"
#: The server's venv; NETTEL_RUCIO_SERVER_VENV moves it.
SERVER_VENV = Path(os.environ.get("NETTEL_RUCIO_SERVER_VENV", REPO_ROOT / ".venv-rucio"))
ACCOUNT = "root"
USERNAME = "ddmlab"
PASSWORD = "secret"
START_TIMEOUT = 60.0
LOOPBACK = "127.0.0.1"

#: Serves Rucio's Flask app with werkzeug (threads: one per request), the port in argv[1].
SERVE_SCRIPT = """
import sys
from werkzeug.serving import run_simple
from rucio.web.rest.flaskapi.v1.main import application
run_simple("127.0.0.1", int(sys.argv[1]), application, threaded=True)
"""
BOOTSTRAP_SCRIPT = """
from rucio.db.sqla.util import build_database, create_base_vo, create_root_account
build_database()
create_base_vo()
create_root_account()
"""


class RucioServerError(RuntimeError):
    """The server could not be installed or started; the message carries its log tail."""


def server_python(venv: Path = SERVER_VENV) -> Path:
    return venv / "bin" / "python"


def install_server_venv(venv: Path = SERVER_VENV) -> Path:
    """Create `venv` with `rucio==RUCIO_VERSION` unless its stamp says it is there; its python.
    Test workers may call this at once: a lock file beside the venv lets one install."""
    stamp = venv / ".nettel-rucio-version"
    python = server_python(venv)
    with venv.with_name(venv.name + ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and stamp.exists() and stamp.read_text().strip() == RUCIO_VERSION:
            return python
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        subprocess.run([*pip, f"rucio=={RUCIO_VERSION}"], check=True)
        stamp.write_text(RUCIO_VERSION + "\n")
    return python


def build_rucio_cfg(base_dir: Path, port: int, migrate_repo: Path) -> str:
    """rucio.cfg for a server on `port` with its SQLite database under `base_dir`, and the
    client section of its root account (userpass)."""
    url = f"http://{LOOPBACK}:{port}"
    return f"""\
[common]
logdir = {base_dir}
loglevel = WARNING

[database]
default = sqlite:///{base_dir / "rucio.db"}

[alembic]
cfg = {base_dir / "alembic.ini"}

[bootstrap]
userpass_identity = {USERNAME}
userpass_pwd = {PASSWORD}

[cache]
# no memcached
url = {LOOPBACK}:0

[monitor]
# else a metrics server opens port 8080
enable_metrics = False

[policy]
permission = generic
schema = generic
lfn2pfn_algorithm_default = hash

[client]
rucio_host = {url}
auth_host = {url}
auth_type = userpass
username = {USERNAME}
password = {PASSWORD}
account = {ACCOUNT}
request_retries = 1

[alembic_migrate_repo]
path = {migrate_repo}
"""


def build_alembic_ini(migrate_repo: Path, database: Path) -> str:
    return f"""\
[alembic]
script_location = {migrate_repo}
sqlalchemy.url = sqlite:///{database}

[loggers]
keys = root

[handlers]
keys = console

[formatters]
keys = generic

[logger_root]
level = WARN
handlers = console

[handler_console]
class = StreamHandler
args = (sys.stderr,)
level = NOTSET
formatter = generic

[formatter_generic]
format = %(levelname)s %(name)s %(message)s
"""


@dataclass
class RucioServer:
    """A running (or stopped) private server; `url`, `config` (its rucio.cfg)."""

    base_dir: Path
    port: int
    python: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def config(self) -> Path:
        return self.base_dir / "rucio.cfg"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "rucio.log"

    def environment(self) -> dict[str, str]:
        """The environment of a Rucio client (or core script) talking to this server."""
        return os.environ | {"RUCIO_CONFIG": str(self.config), "RUCIO_HOME": str(self.base_dir)}

    def client_config(self, account: str, password: str = PASSWORD) -> Path:
        """A rucio.cfg for a client of `account` (userpass identity of the same name)."""
        path = self.base_dir / f"rucio-{account}.cfg"
        path.write_text(
            f"[client]\nrucio_host = {self.url}\nauth_host = {self.url}\nauth_type = userpass\n"
            f"username = {account}\npassword = {password}\naccount = {account}\n"
            "request_retries = 1\n"
        )
        return path

    def run_python(
        self, code: str, *args: str, stdin: str | None = None, timeout: float = 600.0
    ) -> str:
        """Run `code` in the server's venv against its database (Rucio's core API); stdout."""
        done = subprocess.run(
            [str(self.python), "-c", code, *args],
            input=stdin,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RucioServerError(f"rucio script failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Write the configuration, build the database once, serve and wait for `/ping`."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        migrate_repo = Path(
            self.run_python_plain(
                "import os, rucio.db.sqla.migrate_repo as m; print(os.path.dirname(m.__file__))"
            ).strip()
        )
        database = self.base_dir / "rucio.db"
        self.config.write_text(build_rucio_cfg(self.base_dir, self.port, migrate_repo))
        (self.base_dir / "alembic.ini").write_text(build_alembic_ini(migrate_repo, database))
        if not database.exists():
            self.run_python(BOOTSTRAP_SCRIPT)
        command = [str(self.python), "-c", SERVE_SCRIPT, str(self.port)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._wait_ready(command, timeout)

    def run_script(self, command: str, spec: object = None) -> Any:
        """`devtools/rucio_side.py COMMAND` in the server's venv (Rucio's core API), `spec` as
        JSON on its stdin; its JSON output."""
        code = RUCIO_SIDE.read_text()
        return json.loads(self.run_python(code, command, stdin=json.dumps(spec)))

    def run_python_plain(self, code: str) -> str:
        """`code`'s stdout in the server's venv, without the server's configuration."""
        done = subprocess.run(
            [str(self.python), "-c", code], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RucioServerError(f"{self.python} cannot import rucio:\n{done.stderr[-2000:]}")
        return done.stdout

    def stop(self, timeout: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def _wait_ready(self, command: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                break
            try:
                if LOCAL_HTTP.get(f"{self.url}/ping", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-40:])
        raise RucioServerError(
            f"Rucio server did not answer /ping within {timeout:.0f} s\n"
            f"$ {shlex.join(command)}\n--- log ---\n{tail}"
        )


def start_rucio_server(
    base_dir: Path, port: int | None = None, venv: Path = SERVER_VENV
) -> RucioServer:
    """A private Rucio server under `base_dir` on `port` (a free one by default), answering."""
    python = server_python(venv)
    if not python.exists():
        raise RucioServerError(
            f"no Rucio server venv at {venv}: run `python -m devtools.rucio_server install` "
            "(scripts/test.sh does)"
        )
    server = RucioServer(base_dir, port or free_port(), python)
    server.start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.rucio_server")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help=f"create {SERVER_VENV} with rucio {RUCIO_VERSION}")
    start = commands.add_parser("start", help="run a private server in the foreground")
    start.add_argument("--dir", type=Path, required=True, help="base directory")
    start.add_argument("--port", type=int, default=None, help="listen port (default: a free one)")
    args = parser.parse_args(argv)
    if args.command == "install":
        print(install_server_venv())
        return 0
    server = start_rucio_server(args.dir, args.port)
    print(f"Rucio {RUCIO_VERSION} on {server.url}; RUCIO_CONFIG={server.config}", flush=True)
    try:
        assert server.process is not None
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
