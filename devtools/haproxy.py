"""A private HAProxy for tests and benchmarks: the shipped deploy/haproxy/haproxy.cfg, its
frontend bound to a loopback port and its `server` lines pointed at local replicas.

HAProxy runs in the foreground (`-db`) as a child in its own process group, logging to a file
under `base_dir`, asked to get SIGTERM when the thread that started it dies.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from devtools.broker_process import LOOPBACK, _die_with_parent, free_port, read_log_tail

REPO_ROOT = Path(__file__).resolve().parents[1]
DEPLOY_CONFIG = REPO_ROOT / "deploy" / "haproxy" / "haproxy.cfg"
_BIND = re.compile(r"^(\s+)bind \S+$", re.MULTILINE)
_SERVER = re.compile(r"^\s+server \S+ \S+ check\n", re.MULTILINE)


class HAProxyError(RuntimeError):
    """HAProxy is missing, refused its configuration or did not listen in time."""


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/sbin")
    if found is None:
        raise HAProxyError("haproxy is not installed (Debian: apt-get install haproxy)")
    return found


def local_config(text: str, port: int, servers: Sequence[tuple[str, str]]) -> str:
    """`text` (the deploy config) listening on 127.0.0.1:`port`, balancing over `servers`
    (name, host:port) instead of its own; every other line as shipped."""
    if len(_BIND.findall(text)) != 1 or not _SERVER.search(text):
        raise HAProxyError("the config needs one `bind` line and `server ... check` lines")
    text = _BIND.sub(rf"\1bind {LOOPBACK}:{port}", text)
    first = _SERVER.search(text)
    assert first is not None
    lines = "".join(f"    server {name} {address} check\n" for name, address in servers)
    return text[: first.start()] + lines + _SERVER.sub("", text[first.start() :])


def check_config(path: Path) -> subprocess.CompletedProcess[str]:
    """`haproxy -c -f path`: exit status 0 when HAProxy would start with it."""
    command = [haproxy_binary(), "-c", "-f", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


class HAProxyProcess:
    """A running private HAProxy; `url` is its frontend."""

    def __init__(self, base_dir: Path, servers: Sequence[tuple[str, str]]) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.port = free_port()
        self.config_path = self.base_dir / "haproxy.cfg"
        self.log_path = self.base_dir / "haproxy.log"
        self.servers = list(servers)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self, timeout: float = 15.0) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        config = local_config(DEPLOY_CONFIG.read_text(), self.port, self.servers)
        self.config_path.write_text(config)
        checked = check_config(self.config_path)
        if checked.returncode != 0:
            raise HAProxyError(f"haproxy -c refused {self.config_path}:\n{checked.stderr}")
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [haproxy_binary(), "-db", "-f", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # only calls prctl, safe after fork
            )
        deadline = time.monotonic() + timeout
        while not self._listening():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise HAProxyError(f"haproxy did not listen:\n{read_log_tail(self.log_path)}")
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass

    def __enter__(self) -> HAProxyProcess:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _listening(self) -> bool:
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=0.5):
                return True
        except OSError:
            return False
